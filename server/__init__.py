"""The humanlike web server: app factory, models, blueprints, CLI."""
