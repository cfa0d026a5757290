"""The project's own errors (DomainError) fail an asset with their message alone; any other exception
(a bug here or in numpy / pandas / torch, even a ValueError) keeps its stack trace in the Dagster run."""

import dagster as dg
import numpy as np
import pytest

from promo_assets.allocation.chunked import ChunkError
from promo_assets.allocation.errors import AllocationInputError, InfeasibleBudgetError, SolveTooLargeError
from promo_assets.store.artifacts import ArtifactFormatError, ArtifactMissingError, artifact_path
from promo_assets.config.campaign import CampaignConfigError
from promo_assets.core.errors import DomainError
from promo_assets.evaluation import EvaluationError
from promo_assets.core.files import UnsafeFileError, read_text
from promo_assets.models import ModelInputError
from promo_assets.defs.common import domain_errors
from promo_assets.config.settings import SettingsError
from promo_assets.store.warehouse import WarehouseBusyError


@pytest.mark.parametrize("cls", [AllocationInputError, InfeasibleBudgetError, SolveTooLargeError, ArtifactFormatError,
                                 ArtifactMissingError, CampaignConfigError, EvaluationError, ModelInputError,
                                 SettingsError, UnsafeFileError, WarehouseBusyError, ChunkError])
def test_project_errors_are_domain_errors(cls):
    assert issubclass(cls, DomainError)


def test_user_facing_value_errors_are_domain_errors(tmp_path):
    with pytest.raises(ArtifactFormatError, match="artefact version must be 16"):
        artifact_path("model", "../../etc/passwd")
    big = tmp_path / "campaign.yaml"
    big.write_text("x" * 100)
    with pytest.raises(UnsafeFileError, match="larger than 10 bytes"):
        read_text(big, 10, what="campaign.yaml")


def test_domain_error_becomes_a_failure_with_its_message_alone():
    with pytest.raises(dg.Failure) as info:
        with domain_errors():
            raise ModelInputError("feature 'x' is missing")
    assert info.value.description == "feature 'x' is missing"
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_other_errors_pass_through_unchanged():
    with pytest.raises(ValueError, match="operands could not be broadcast") as info:
        with domain_errors():
            np.ones(3) + np.ones(4)
    assert not isinstance(info.value, (dg.Failure, DomainError))


def test_a_chunk_error_keeps_its_cause():
    try:
        raise KeyError("boom")
    except KeyError as exc:
        chunk = ChunkError("chunk 3: KeyError: 'boom'")
        chunk.__cause__ = exc
    with pytest.raises(dg.Failure) as info:
        with domain_errors():
            raise chunk
    assert isinstance(info.value.__cause__, KeyError)


def _numpy_bug():
    return np.ones(3) + np.ones(4)  # ValueError raised inside numpy


def _failed_run(fn):
    @dg.asset
    def broken():
        with domain_errors():
            fn()

    result = dg.materialize([broken], raise_on_error=False)
    assert not result.success
    return result


def _step_error(fn):
    (failure,) = [e for e in _failed_run(fn).all_events if e.event_type_value == "STEP_FAILURE"]
    return failure.event_specific_data.error


def test_an_unexpected_error_shows_its_origin_in_the_dagster_run():
    err = _step_error(_numpy_bug)
    chain, e = [], err
    while e is not None:
        chain.append(e)
        e = e.cause
    stacks = "".join("".join(x.stack) for x in chain)
    assert any(x.cls_name == "ValueError" for x in chain)
    assert "_numpy_bug" in stacks and "test_domain_errors.py" in stacks


def test_a_domain_error_shows_its_message_alone_in_the_dagster_run():
    def bad_input():
        raise ModelInputError("frame has no column 'level'")

    err = _step_error(bad_input)
    chain, e = [], err
    while e is not None:
        chain.append(e)
        e = e.cause
    failure = [x for x in chain if x.cls_name == "Failure"]
    assert failure and "frame has no column 'level'" in failure[0].message
    assert failure[0].cause is None  # raised from None: no second stack under the message
    assert not any(x.cls_name == "ModelInputError" for x in chain)


def test_promo_run_prints_one_line_per_failed_step_without_a_stack():
    """`promo run` reports a failed step by its message (the domain error's alone; an unexpected
    error's class and message), never a stack trace: the stack stays in the Dagster run."""
    from promo_assets.cli.main import _failure_messages

    def bad_input():
        raise ModelInputError("frame has no column 'level'")

    domain = _failure_messages(_failed_run(bad_input))
    bug = _failure_messages(_failed_run(_numpy_bug))
    assert domain == ["broken: frame has no column 'level'"]
    assert len(bug) == 1 and bug[0].startswith("broken: ") and "operands could not be broadcast" in bug[0]
    for text in domain + bug:
        assert "Traceback" not in text and 'File "' not in text
