"""The tidy export (DESIGN.md, Export): tables, their sinks, the codebook, and psiTurk's own CSVs."""
