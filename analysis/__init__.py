"""Pure analysis functions over numpy arrays and tidy pandas frames (no Flask, no database)."""
