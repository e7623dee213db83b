"""The `Scheme` enum: cast once from user input, written as its bare name, capabilities."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from simulator.cost import COST_MODELS
from simulator.errors import InputError
from simulator.scheme import FUSED_SCHEMES, SEARCHABLE_SCHEMES, Scheme


def test_parse_is_case_insensitive_and_idempotent():
    assert Scheme.parse("LBDF") is Scheme.LBDF
    assert Scheme.parse(" brr ") is Scheme.BRR
    assert Scheme.parse(Scheme.LBL) is Scheme.LBL


def test_a_bad_name_is_quoted_with_the_choices():
    with pytest.raises(InputError, match=r"^unknown scheme 'lbfd'; choose one of lbdf, brr, "
                                         r"lbl, hybrid$"):
        Scheme.parse("lbfd")
    with pytest.raises(InputError, match=r"^scheme 'lbl' is not supported here; choose one of "
                                         r"lbdf, brr$"):
        Scheme.parse("lbl", FUSED_SCHEMES)


def test_outputs_write_the_bare_name():
    assert json.dumps({"scheme": Scheme.BRR}) == '{"scheme": "brr"}'
    assert f"{Scheme.LBDF}" == "lbdf" and str(Scheme.LBL) == "lbl"
    assert pd.DataFrame({"scheme": [Scheme.BRR]}).to_csv(index=False) == "scheme\nbrr\n"
    assert Scheme.LBDF == "lbdf" and {"lbdf": 1}[Scheme.LBDF] == 1


def test_capabilities_and_cost_models():
    assert FUSED_SCHEMES == (Scheme.LBDF, Scheme.BRR)
    assert [s for s in Scheme if s.tiled] == [Scheme.BRR]
    assert not Scheme.LBL.searchable
    assert set(COST_MODELS) == set(Scheme)
    assert SEARCHABLE_SCHEMES == (Scheme.LBDF, Scheme.BRR, Scheme.HYBRID)
    assert [s for s in Scheme if s.mixed] == [Scheme.HYBRID]
    assert Scheme.HYBRID.fused == FUSED_SCHEMES and Scheme.LBDF.members == (Scheme.LBDF,)
