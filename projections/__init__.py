"""Read models built from the event log. ``replay`` is the reference: a fold of the log from index 1."""
