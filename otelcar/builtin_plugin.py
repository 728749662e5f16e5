"""The built-in plugin: otelcar's own mappers, formats, policy types, outcomes, executors and
sources, registered through the same hooks as a third party's (:mod:`otelcar.plugins.hookspecs`).

It reaches into every layer, so it lives in the application layer, not in the plugin door
(:mod:`otelcar.plugins`, which every registry imports): the plugin manager loads it by name
(:data:`otelcar.plugins.manager.BUILTIN_MODULE`), as it loads a third party's.

It is registered before every other plugin, so a plugin registering a name a built-in has
replaces it (with a ``note:``). Each hook imports its area only when called: mapping spans
imports no policy, reading ``[outcome]`` no mapper. Built-in commands are not here: the command
line looks them up lazily by name (:data:`otelcar.cli.COMMANDS`) so that ``--version`` imports
none of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from otelcar.plugins.hookspecs import hookimpl


@hookimpl
def register_mappers(register: Callable[[Any], None]) -> None:
    from otelcar.conventions.braintrust import BraintrustMapper
    from otelcar.conventions.genai import GenAIMapper
    from otelcar.conventions.google_adk import GoogleADKMapper
    from otelcar.conventions.haystack import HaystackMapper
    from otelcar.conventions.langfuse import LangfuseMapper
    from otelcar.conventions.langsmith import LangSmithMapper
    from otelcar.conventions.latitude import LatitudeMapper
    from otelcar.conventions.litellm_raw import LiteLLMRawMapper
    from otelcar.conventions.mlflow import MLflowMapper
    from otelcar.conventions.openinference import OpenInferenceMapper
    from otelcar.conventions.openllmetry import OpenLLMetryMapper
    from otelcar.conventions.vercel_ai import VercelAIMapper
    from otelcar.conventions.whowhen import WhoWhenMapper

    # Registration order breaks ties of claim priority (the earlier wins).
    for mapper in (
        GenAIMapper,
        WhoWhenMapper,
        LangfuseMapper,
        LangSmithMapper,
        OpenInferenceMapper,
        OpenLLMetryMapper,
        VercelAIMapper,
        GoogleADKMapper,
        BraintrustMapper,
        LiteLLMRawMapper,
        LatitudeMapper,
        MLflowMapper,
        HaystackMapper,
    ):
        register(mapper())


@hookimpl
def register_formats(register: Callable[[Any], None]) -> None:
    from otelcar.ingest.exports import BUILTIN_FORMAT_MODULES

    for module in BUILTIN_FORMAT_MODULES:
        for fmt in importlib.import_module(module).FORMATS:
            register(fmt)


@hookimpl
def register_policy_types(register: Callable[..., None]) -> None:
    from otelcar.policies.registry import BUILTIN_POLICY_TYPES

    for name, kind, factory in BUILTIN_POLICY_TYPES:
        register(name, kind, factory)


@hookimpl
def register_outcomes(register: Callable[..., None]) -> None:
    from otelcar.outcome import BUILTIN_OUTCOMES

    for name, factory in BUILTIN_OUTCOMES:
        register(name, factory)


@hookimpl
def register_executors(register: Callable[..., None]) -> None:
    from otelcar.executors import BUILTIN_EXECUTORS

    for name, factory in BUILTIN_EXECUTORS:
        register(name, factory)


@hookimpl
def register_sources(register: Callable[..., None]) -> None:
    from otelcar.sources import BUILTIN_SOURCES

    for scheme, factory in BUILTIN_SOURCES:
        register(scheme, factory)
