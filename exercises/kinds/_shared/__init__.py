"""What several kinds share and no kind owns: the backward derivations, the eˣ aids of kinds the
pipeline does not walk, the small gradient values, and the declarations of a kind's Home stage and
formula-sheet section. Not a kind: discovery skips folders whose name starts with an underscore."""
