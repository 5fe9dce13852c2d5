"""One module per calculator; each has SCHEMA (see calculators.schema) and compute(values)."""
