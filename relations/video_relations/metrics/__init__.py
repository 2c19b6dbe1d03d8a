"""Exact port of the official VidVRD / VidOR relation evaluation.

Public API:
  scoring.evaluate(groundtruth, prediction, protocol) -> scoring.Result
  scoring.evaluate_tables(gt_table, pred_table, protocol) -> scoring.Result
  columns.RelationTable.from_relations / .from_dicts (array tables)
  scoring.zero_shot_triplets / scoring.zero_shot_split
  scoring.TableEvaluation(gt_table, protocol).add(chunk_table) ... .result()
  validate.validate_submission(submission, ...) -> validate.Report
  validate.ColumnarValidator / validate.validate_file(path, ...)
  fastjson.scan_document(path) (window-by-window reader), fastjson.read_table
  io.read_groundtruth_table(path), io.load_submission / io.load_groundtruth
  (dicts: the test oracle)
"""
