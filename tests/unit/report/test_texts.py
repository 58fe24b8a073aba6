"""The report's fixed prose (``report.texts``) agrees with the code that owns each fact: every exit code the gates
can return has its meaning (``analysis.gates.EXIT_MEANINGS``), and the rules quote the analysis's own thresholds."""

from locust_llm.analysis import gates
from locust_llm.analysis.curves import KNEE_ELASTICITY, SATURATION_MIN_GAIN
from locust_llm.analysis.steady import DRIFT_TOLERANCE
from locust_llm.analysis.validity import CPU_PERCENT_MAX
from locust_llm.report.texts import DEFINITIONS, RULES


def test_every_exit_code_the_gates_return_has_a_meaning():
    codes = {value for name, value in vars(gates).items() if name.startswith("EXIT_") and isinstance(value, int)}
    assert codes == set(gates.EXIT_MEANINGS) == {gates.EXIT_OK, *gates.SEVERITY}


def test_the_rules_quote_the_thresholds_the_analysis_applies():
    rules = " ".join(text for _name, text in RULES)
    assert f"95% upper bound below {KNEE_ELASTICITY:g}" in rules  # the closed-loop knee's elasticity
    assert f"+{SATURATION_MIN_GAIN:.0%}" in rules
    assert f"+-{DRIFT_TOLERANCE:.0%} of the mean" in rules
    assert f"above {CPU_PERCENT_MAX:.0f}% of a core" in rules


def test_each_definition_is_named_once():
    names = [name for name, _text in DEFINITIONS]
    assert len(names) == len(set(names)) and all(text.strip() for _name, text in DEFINITIONS)
