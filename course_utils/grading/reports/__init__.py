"""The reports: every output a grading run writes from the results model (see ``grading``)."""
