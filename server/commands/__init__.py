"""Analysis and stimulus subcommands of the ``humanlike`` CLI, one module per command (loaded lazily)."""
