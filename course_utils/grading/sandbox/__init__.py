"""The sandbox: everything that runs student code, and the judge's side of talking to it (see ``grading``)."""
