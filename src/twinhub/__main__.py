from twinhub.cli import main

main()
