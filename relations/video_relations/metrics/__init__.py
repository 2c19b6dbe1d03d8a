"""Exact port of the official VidVRD / VidOR relation evaluation.

Public API:
  scoring.evaluate(groundtruth, prediction, protocol) -> scoring.Result
  scoring.evaluate_tables(gt_table, pred_table, protocol) -> scoring.Result
  columns.RelationTable.from_relations / .from_dicts (array tables)
  scoring.zero_shot_triplets / scoring.zero_shot_split
  validate.validate_submission(submission, ...) -> validate.Report
  io.load_submission(path), io.load_groundtruth(path)
"""
