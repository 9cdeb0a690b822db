"""The inference engine under its one name at run time too: a grader config or a service.json
written by a2c 0.1.0 (`backend`) reads as `engine` (the compiler's rename: compiler/renamed.py)."""

from __future__ import annotations

from a2c.contracts.inference import DEFAULT_INFERENCE, InferenceBlock, inference_block
from a2c.contracts.service_config import ServiceConfig


def test_an_old_inference_block_reads_as_engine():
    assert inference_block({"backend": "vllm"}) == {**DEFAULT_INFERENCE, "engine": "vllm"}
    assert InferenceBlock.of({"backend": "transformers"}).engine == "transformers"
    assert InferenceBlock.of(None).engine == "auto"
    # the new name wins where a config somehow holds both
    assert InferenceBlock.of({"engine": "vllm", "backend": "transformers"}).engine == "vllm"


def test_a_grader_reads_the_engine_of_an_old_config():
    from a2c.runtime.graders import get_grader

    grader = get_grader({"kind": "exact_match", "params": {}, "inference": {"backend": "vllm"}})
    assert grader.grading.engine == "vllm" and "backend" not in grader.inference


def test_service_json_engine_and_its_old_name(tmp_path):
    base = {"token": "t", "output_dir": str(tmp_path), "port": 0}
    assert ServiceConfig.from_dict(tmp_path, {**base, "engine": "vllm"}).engine == "vllm"
    assert ServiceConfig.from_dict(tmp_path, {**base, "backend": "vllm"}).engine == "vllm"
    assert ServiceConfig.from_dict(tmp_path, base).engine == "auto"
