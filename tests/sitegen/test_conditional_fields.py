"""Reader walk #25: inputs that apply to one choice only are hidden by calculators.css until that choice is
made. Every rule there must name a real choice, one of its values, and an input of a calculator that has
both (a renamed input would otherwise leave its field showing, or hide another's)."""

from __future__ import annotations

import re
from pathlib import Path

import calculators

CSS = Path(__file__).resolve().parents[2] / "docs" / "assets" / "calculators" / "calculators.css"
RULE = re.compile(
    r'\.calc:has\(\[name="(?P<choice>\w+)"\] option(?:\[value="(?P<is>\w+)"\]|:not\(\[value="(?P<not>\w+)"\]\))'
    r':checked\)\s+\[data-field="(?P<field>\w+)"\]'
)


def test_every_conditional_rule_names_a_choice_its_value_and_a_field_beside_it():
    rules = list(RULE.finditer(CSS.read_text(encoding="utf-8")))
    assert len(rules) >= 12
    for rule in rules:
        owners = []
        for name in calculators.calculator_names():
            inputs = {s["key"]: s for s in calculators.schema(name)["inputs"]}
            choice = inputs.get(rule["choice"])
            if choice and rule["field"] in inputs:
                values = {c["value"] for c in choice["choices"]}
                assert (rule["is"] or rule["not"]) in values, (name, rule.group(0))
                owners.append(name)
        assert owners, f"no calculator has both {rule['choice']} and {rule['field']}"
