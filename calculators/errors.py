"""The one error type every calculator raises for bad input."""


class InputError(ValueError):
    """Invalid input: names the field and says what is allowed.

    Subclasses ValueError so callers may catch either. ``field`` is the input key
    (dotted for nested fields, e.g. ``"model.num_layers"``) so a form can show the
    message next to the right control.
    """

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message

    def to_json(self) -> dict:
        return {"field": self.field, "message": self.message}
