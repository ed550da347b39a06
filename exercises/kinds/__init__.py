"""One folder per exercise kind (module, texts per language, Home stage, formula-sheet section);
exercises.engine discovers them. ``_shared/`` holds what several kinds use and is not a kind."""
