"""The trial types, one file each, and their registry (DESIGN.md, Trial types)."""
