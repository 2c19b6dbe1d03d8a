"""Exact port of the official VidVRD / VidOR relation evaluation (spec 1).

Public API:
  scoring.evaluate(groundtruth, prediction, protocol) -> scoring.Result
  scoring.zero_shot_triplets / scoring.zero_shot_split
  validate.validate_submission(submission, ...) -> validate.Report
  io.load_submission(path), io.load_groundtruth(path)
"""
