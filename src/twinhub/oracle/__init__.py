"""The oracle's running workers: the service that evaluates submitted claims and the
monitoring periods it computes and stores. The rules they apply are twinhub.mrv's."""
