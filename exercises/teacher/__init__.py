"""What teachers build from exercises: assignment specs and per-student variants."""
