"""The USSD menu's flows, one per menu: each answers its states and builds its screens."""
