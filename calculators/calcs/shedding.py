"""Load shedding and a wrong length predictor: what a queue-length threshold and a predictor's error cost.

Shedding (the engine's max_waiting, config.py): an arrival that finds max_waiting requests waiting is
rejected at once, as an HTTP 429 would tell the client to retry elsewhere or later. A rejected request
counts as missing the SLO, so attainment and per-run goodput (rate × attainment, Part 3) are over every
arrival; the share rejected is reported beside them. THRESHOLDS are the queue lengths plotted (0 is no
shedding).

The predictor: shortest predicted output first (the engine's "sjf") with predictions = true output × a
log-normal factor of median 1 and spread ERRORS (workload.with_predictions); 0 is an oracle. FCFS, which
needs no prediction, is the reference line. Same requests, rate and replica as scheduler_sim.
"""

from __future__ import annotations

import math


from ..engine import workload as engine_workload
from ..schema import choice, integer, mark, number, output, series, step
from .deployment import efficiency_steps
from .scheduler_sim import fields, run, setup, unsaturated_note
from .steptime import deployment

THRESHOLDS = (0, 2, 4, 8, 16)
TTFT_THRESHOLDS = (0.05, 0.1, 0.2, 0.5, 1.0)  # predicted-TTFT thresholds plotted (s)
ERRORS = (0.0, 0.5, 1.0, 2.0, 4.0)


def _fields() -> list[dict]:
    return fields(8.0, 50) + [
        integer(
            "max_waiting",
            "Shedding threshold: most requests waiting",
            4,
            0,
            100_000,
            "requests",
            "An arrival that finds this many waiting is rejected (HTTP 429); 0 sheds nothing.",
        ),
        number(
            "max_predicted_ttft_s",
            "Predicted-TTFT shedding threshold",
            1.0,
            0.0,
            3600.0,
            "s",
            "An arrival whose predicted TTFT (the prompt tokens waiting ahead plus its own, at the rate of a "
            "full-budget prefill chunk) is above this is rejected; 0 sheds nothing. The prediction leaves out "
            "the wait for a free slot and the decodes that share each step.",
            0.01,
        ),
        choice(
            "shed_policy",
            "Queue order while shedding",
            "fcfs",
            [("fcfs", "First come first served"), ("sjf", "Shortest predicted output first")],
        ),
    ]


SCHEMA = {
    "name": "shedding",
    "title": "Load shedding and length-predictor error (simulated)",
    "description": (
        "The replica, workload and objectives of the scheduling calculator, at one rate. Shedding: an "
        "arrival that finds the threshold's number of requests waiting is rejected at once (an HTTP 429) "
        "and counts as missing the SLO; attainment and per-run goodput (rate × attainment) are over every "
        "arrival. The engine's second rule rejects an arrival whose predicted TTFT (prompt tokens waiting "
        "ahead plus its own, at the rate of a full-budget prefill chunk) is above its threshold. "
        "Predictor: shortest predicted output first with a log-normal prediction error of each "
        "plotted spread, against first come first served. Finite runs from an empty server."
    ),
    "inputs": _fields(),
    "outputs": [
        output("capacity_requests_per_s", "Capacity (measured, all queued at once)", "requests/s", "rate"),
        output("utilisation", "Load ÷ capacity (ρ)", "", "percent"),
        output("attainment_shed", "With your threshold: SLO attainment (every arrival)", "", "percent"),
        output("goodput_shed_requests_per_s", "With your threshold: goodput (rate × attainment)", "requests/s", "rate"),
        output("rejected_share_shed", "With your threshold: share rejected (429)", "", "percent"),
        output("ttft_p99_served_shed_s", "With your threshold: TTFT p99 of those served", "s", "seconds"),
        output("attainment_ttft_shed", "Predicted-TTFT threshold: SLO attainment", "", "percent"),
        output("goodput_ttft_shed_requests_per_s", "Predicted-TTFT threshold: goodput", "requests/s", "rate"),
        output("rejected_share_ttft_shed", "Predicted-TTFT threshold: share rejected (429)", "", "percent"),
        output(
            "best_ttft_threshold_s",
            "Predicted-TTFT threshold with the highest goodput (of those plotted)",
            "s",
            "seconds",
        ),
        output("attainment_no_shed", "No shedding: SLO attainment", "", "percent"),
        output("goodput_no_shed_requests_per_s", "No shedding: goodput (rate × attainment)", "requests/s", "rate"),
        output("ttft_p99_no_shed_s", "No shedding: TTFT p99", "s", "seconds"),
        output(
            "little_threshold",
            "Threshold from Little's law: capacity × TTFT target",
            "requests",
            "integer",
        ),
        output(
            "best_threshold", "Threshold with the highest goodput (of those plotted and yours)", "requests", "integer"
        ),
        output("attainment_sjf_your_predictor", "SJF with your predictor: SLO attainment", "", "percent"),
        output("attainment_sjf_oracle", "SJF with an exact predictor: SLO attainment", "", "percent"),
        output("attainment_fcfs", "FCFS (no predictor): SLO attainment", "", "percent"),
        output("queue_mean_sjf_your_predictor_s", "SJF with your predictor: mean queueing delay", "s", "seconds"),
        output("queue_mean_fcfs_s", "FCFS: mean queueing delay", "s", "seconds"),
        output("queue_mean_sjf_oracle_s", "SJF with an exact predictor: mean queueing delay", "s", "seconds"),
        output(
            "queue_mean_sjf_worst_s",
            "SJF with the worst predictor plotted (spread 4): mean queueing delay",
            "s",
            "seconds",
        ),
        output(
            "attainment_sjf_worst", "SJF with the worst predictor plotted (spread 4): SLO attainment", "", "percent"
        ),
    ],
}


def compute(v: dict) -> dict:
    dep = deployment(v)
    s = setup(v)
    rate, policy = v["request_rate_per_s"], v["shed_policy"]
    thresholds = sorted({*THRESHOLDS, v["max_waiting"]})
    shed = {t: run(v, s, policy, rate, max_waiting=t) for t in thresholds}
    errors = sorted({*ERRORS, v["predictor_error_cv"]})
    base = list(s.requests)
    sjf = {e: run(v, s, "sjf", rate, requests=engine_workload.with_predictions(base, e, v["seed"])) for e in errors}
    fcfs = shed[0] if policy == "fcfs" else run(v, s, "fcfs", rate)
    mine, none = shed[v["max_waiting"]], shed[0]
    best = max(thresholds, key=lambda t: (shed[t]["goodput"], -t))
    ours = sjf[v["predictor_error_cv"]]
    ttft, ttft_series = _predicted_ttft_shedding(v, s, rate, policy)
    return {
        "capacity_requests_per_s": s.capacity,
        "utilisation": rate / s.capacity if s.capacity else 0.0,
        "attainment_shed": mine["attainment"],
        "goodput_shed_requests_per_s": mine["goodput"],
        "rejected_share_shed": mine["rejected_share"],
        "ttft_p99_served_shed_s": mine["ttft_p99"],
        "attainment_no_shed": none["attainment"],
        "goodput_no_shed_requests_per_s": none["goodput"],
        "ttft_p99_no_shed_s": none["ttft_p99"],
        "little_threshold": math.floor(s.capacity * v["ttft_slo_s"]),
        "best_threshold": best,
        "attainment_sjf_your_predictor": ours["attainment"],
        "attainment_sjf_oracle": sjf[0.0]["attainment"],
        "attainment_fcfs": fcfs["attainment"],
        "queue_mean_sjf_your_predictor_s": ours["queue_mean"],
        "queue_mean_fcfs_s": fcfs["queue_mean"],
        "queue_mean_sjf_oracle_s": sjf[0.0]["queue_mean"],
        "queue_mean_sjf_worst_s": sjf[ERRORS[-1]]["queue_mean"],
        "attainment_sjf_worst": sjf[ERRORS[-1]]["attainment"],
        **ttft,
        "notes": unsaturated_note(v, s),
        "derivation": efficiency_steps(dep) + _steps(v, s, mine, none),
        "series": _marked(_series(thresholds, shed, errors, sjf, fcfs) | ttft_series, v),
    }


def _predicted_ttft_shedding(v: dict, s, rate: float, policy: str) -> tuple[dict, dict]:
    """The engine's second rule (max_predicted_ttft_s) at the reader's threshold and at TTFT_THRESHOLDS."""
    limits = sorted({*TTFT_THRESHOLDS, v["max_predicted_ttft_s"]} - {0.0})
    runs = {t: run(v, s, policy, rate, max_predicted_ttft_s=t) for t in limits}
    mine = runs.get(v["max_predicted_ttft_s"]) or run(v, s, policy, rate)
    outputs = {
        "attainment_ttft_shed": mine["attainment"],
        "goodput_ttft_shed_requests_per_s": mine["goodput"],
        "rejected_share_ttft_shed": mine["rejected_share"],
        "best_ttft_threshold_s": max(limits, key=lambda t: (runs[t]["goodput"], -t)) if limits else 0.0,
    }
    plot = series(
        "SLO attainment and share rejected vs predicted-TTFT shedding threshold",
        "max_predicted_ttft_s",
        "s",
        limits,
        [
            ("SLO attainment", "%", [100 * runs[t]["attainment"] for t in limits]),
            ("rejected (429)", "%", [100 * runs[t]["rejected_share"] for t in limits]),
        ],
    )
    return outputs, {"ttft_shedding_vs_threshold": plot}


def _steps(v: dict, s, mine: dict, none: dict) -> list[dict]:
    return _shed_steps(v, s, mine) + _goodput_steps(v, s, mine, none)


def _shed_steps(v: dict, s, mine: dict) -> list[dict]:
    rate = (v["request_rate_per_s"], "requests/s")
    return [
        step(
            "Load ÷ capacity",
            "rate ÷ capacity (measured)",
            "{} ÷ {}",
            [rate, (s.capacity, "requests/s")],
            v["request_rate_per_s"] / s.capacity if s.capacity else 0.0,
            "share",
        ),
        step(
            "Rejected with your threshold",
            "arrivals that found max_waiting waiting ÷ arrivals",
            "max_waiting = {}",
            [v["max_waiting"]],
            mine["rejected_share"],
            "share",
        ),
    ]


def _goodput_steps(v: dict, s, mine: dict, none: dict) -> list[dict]:
    rate = (v["request_rate_per_s"], "requests/s")
    return [
        step(
            "Goodput with your threshold",
            "rate × (served within TTFT and TPOT targets ÷ arrivals)",
            "{} × {}",
            [rate, mine["attainment"]],
            mine["goodput"],
            "requests/s",
        ),
        step(
            "Threshold from Little's law",
            "a request that finds k waiting waits about k ÷ capacity: k = ⌊capacity × TTFT target⌋",
            "⌊{} × {}⌋",
            [(s.capacity, "requests/s"), (v["ttft_slo_s"], "s")],
            math.floor(s.capacity * v["ttft_slo_s"]),
            "requests",
        ),
        step(
            "Goodput without shedding",
            "rate × attainment",
            "{} × {}",
            [rate, none["attainment"]],
            none["goodput"],
            "requests/s",
        ),
    ]


MARKED = {
    "shedding_vs_threshold": "max_waiting",
    "served_ttft_vs_threshold": "max_waiting",
    "predictor_error": "predictor_error_cv",
    "predictor_queue": "predictor_error_cv",
    "ttft_shedding_vs_threshold": "max_predicted_ttft_s",
}


def _marked(plots: dict, v: dict) -> dict:
    """Each plot's reader's point (reader walk #29); a threshold of 0 (off) is on no plot."""
    for sid, key in MARKED.items():
        if v[key] in plots[sid]["x"]["values"]:
            mark(plots[sid], key, v[key])
    return plots


def _series(thresholds, shed, errors, sjf, fcfs) -> dict:
    return _shedding_series(thresholds, shed) | _predictor_series(errors, sjf, fcfs)


def _shedding_series(thresholds, shed) -> dict:
    return {
        "shedding_vs_threshold": series(
            "SLO attainment and share rejected vs shedding threshold (0 = none)",
            "max_waiting",
            "requests",
            thresholds,
            [
                ("SLO attainment", "%", [100 * shed[t]["attainment"] for t in thresholds]),
                ("rejected (429)", "%", [100 * shed[t]["rejected_share"] for t in thresholds]),
            ],
        ),
        "served_ttft_vs_threshold": series(
            "TTFT of the requests served vs shedding threshold",
            "max_waiting",
            "requests",
            thresholds,
            [
                ("TTFT p99", "s", [shed[t]["ttft_p99"] for t in thresholds]),
                ("TTFT mean", "s", [shed[t]["ttft_mean"] for t in thresholds]),
            ],
        ),
    }


def _predictor_series(errors, sjf, fcfs) -> dict:
    return {
        "predictor_error": series(
            "SLO attainment vs length-predictor error (SJF), FCFS for reference",
            "Predictor spread (std ÷ mean)",
            "",
            errors,
            [
                ("SJF (predicted)", "%", [100 * sjf[e]["attainment"] for e in errors]),
                ("FCFS", "%", [100 * fcfs["attainment"] for _ in errors]),
            ],
        ),
        "predictor_queue": series(
            "Mean queueing delay vs length-predictor error (SJF), FCFS for reference",
            "Predictor spread (std ÷ mean)",
            "",
            errors,
            [
                ("SJF (predicted)", "s", [sjf[e]["queue_mean"] for e in errors]),
                ("FCFS", "s", [fcfs["queue_mean"] for _ in errors]),
            ],
        ),
    }
