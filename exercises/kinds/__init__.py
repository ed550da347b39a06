"""One folder per exercise kind (module, texts per language, Home stage, formula-sheet section);
exercises.core.engine discovers them. ``_shared/`` holds what several kinds use and is not a kind."""
