"""Interface B: the USSD gateway a telecom calls once per keypress-and-send of a user."""
