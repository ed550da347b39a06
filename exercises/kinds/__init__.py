"""One module per exercise kind; the registry in exercises.engine discovers them."""
