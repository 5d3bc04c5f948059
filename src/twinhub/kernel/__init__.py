"""The shared kernel: what every layer may use and nothing below it provides."""
