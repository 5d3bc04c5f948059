"""Oracle twins: methodologies kept as data and the evaluations that apply them."""
