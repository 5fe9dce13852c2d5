"""An iteration-level serving-engine simulator: one engine loop, many scenarios (issue #13).

`config` describes requests and the engine's settings, `steps` prices one engine step with the core's
step model, `pool` is the paged KV pool, `queue` orders waiting requests by policy, `core` runs the
loop, `result` summarises what happened. Every step time comes from calcs.steptime.StepModel, so the
simulator agrees with the roofline and latency calculators by construction.
"""
