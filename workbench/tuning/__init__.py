"""Speed choices measured where the run runs: this machine's fingerprint, the probe that times the levers, and
the server's cache of what it chose."""
