"""Step handlers of the diagnosis state machine, one module per step (seed 000 §2)."""
