"""Who may use a shared dashboard: user accounts with hashed passwords (`users`)."""
