"""The grade book: the course's store of record, its commands and exports (see ``grading``)."""
