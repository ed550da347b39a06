"""LaTeX of matrices, formulas and derivations."""
