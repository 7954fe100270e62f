"""Who may do what in a lab: roles, study membership and its permissions, personal API tokens."""
