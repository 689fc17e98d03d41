"""prism.validation.jsonschema: not built yet; its issue will fill this facade."""

__all__: list[str] = []
