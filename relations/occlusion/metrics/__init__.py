"""Oriented occlusion-boundary evaluation without MATLAB.

Modules: `nms` (edge_nms, crispness), `thin` (bwmorph thin), `matching`
(exact min-cost maximum matching), `image_eval` (per-image counts),
`aggregate` (ODS/OIS/AP), `api` (evaluate_arrays / evaluate_dir), `plots`,
`pred_readers` (other tools' prediction files), `doob_tables` (doobscripts'
eval_bdry*.txt tables),
`depth_orientation` and `depth_probes` (RealOOB §4.3), `synthetic`.
"""
