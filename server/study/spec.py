"""Experiment specs: a TOML file validated with pydantic; errors name the file and the field."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from humanlike.analysis.exclusions import ExclusionRules
from humanlike.analysis.psychds.replication import ReplicationSettings
from humanlike.server.platforms import (
    EXIT_CODE_TYPES,
    PRESETS,
    Exit,
    Platform,
    exit_problem,
    resolve,
)
from humanlike.server.study import languages
from humanlike.server.study.settings import (
    AdaptiveSettings,
    DisplaySettings,
    PanelSettings,
    Stopping,
)
from humanlike.server.trial_types.classification import ClassificationSettings
from humanlike.server.trial_types.odd_one_out import OddOneOutSettings
from humanlike.server.trial_types.registry import (
    TRIAL_TYPES,
    block_settings,
    check_block_trial_type,
)
from humanlike.vocabulary import StimulusKind


class SpecError(ValueError):
    """A spec or manifest problem, with the file and the field it concerns."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Category(_Strict):
    """One response category: its label (as exported) and the key that steps its rating."""

    label: str = Field(min_length=1, max_length=100)
    key: str = Field(min_length=1, max_length=1, pattern=r"^[a-z0-9]$")


class Presentation(_Strict):
    """How long the image stays: until the response, or ``duration_ms`` then an optional mask."""

    mode: Literal["until_response", "duration"] = "until_response"
    duration_ms: Annotated[int, Field(gt=0, le=60_000)] | None = None
    mask: str | None = None
    image_height_px: Annotated[int, Field(ge=32, le=2000)] = 280
    image_height_deg: Annotated[float, Field(gt=0, le=60)] | None = None
    """The image height in degrees of visual angle (needs ``[display] calibration``); replaces
    ``image_height_px`` with the participant's calibrated size (``server/participants/display.py``)."""
    fixation_ms: Annotated[int, Field(ge=0, le=10_000)] = 0
    iti_ms: Annotated[int, Field(ge=0, le=10_000)] = 0

    @model_validator(mode="after")
    def _duration_needs_ms(self) -> Presentation:
        if self.mode == "duration" and self.duration_ms is None:
            raise ValueError("presentation.mode = 'duration' needs duration_ms")
        return self


ResumePolicy = Literal["resume", "restart_block", "refuse"]
"""What a returning participant gets in a block: continue where they stopped, the block again from
its first trial, or a polite refusal (docs/participants-rights.md)."""


class ResumeSettings(_Strict):
    """``[resume]``: the default policy of every block and ``max_age_minutes``, the longest absence
    (since the last stored trial) after which a returning participant is refused whatever the policy."""

    policy: ResumePolicy = "resume"
    max_age_minutes: Annotated[int, Field(gt=0, le=525_600)] | None = None


class Privacy(_Strict):
    """``[privacy]``: what is stored and for how long (never the IP address)."""

    store_user_agent: bool = False
    retention_days: Annotated[int, Field(gt=0, le=36_500)] | None = None
    """Days after a participant's last activity when ``humanlike retention`` replaces their
    platform ids by keyed hashes; None: kept until deleted."""
    withdraw_until: dt.date | None = None
    """The last day a participant may withdraw (when the data are published); None: always."""


class BreakerRules(_Strict):
    """``[breaker]``: the quality circuit breaker, over participants who arrived in the last
    ``window_minutes``; it never trips on fewer than ``min_participants`` finished ones."""

    window_minutes: Annotated[int, Field(gt=0, le=100_000)] = 60
    min_participants: Annotated[int, Field(ge=5, le=100_000)] = 20
    max_qc_fail_share: Annotated[float, Field(gt=0, le=1)] | None = 0.5
    max_return_share: Annotated[float, Field(gt=0, le=1)] | None = 0.6
    max_error_rate: Annotated[float, Field(gt=0, le=1)] | None = 0.2
    min_time_share: Annotated[float, Field(ge=0, le=1)] | None = 0.3
    """Trips when the median time on task (sum of reaction times) is below this share of the
    timeline's estimate of the same trials. A ``max_*`` of 1 or a ``min_time_share`` of 0 switches
    that rule off."""
    max_flagged_share: Annotated[float, Field(gt=0, le=1)] | None = None
    """Trips when more than this share of the finished participants (each source once) is flagged
    by the authenticity screen (docs/authenticity.md); off unless set."""


class Block(_Strict):
    """A block of trials of one type over stimuli selected by kind (and optionally by sequence)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    trial_type: Annotated[str, AfterValidator(check_block_trial_type)]
    kinds: list[StimulusKind] = Field(min_length=1)
    practice: Annotated[int, Field(ge=0)] = 0
    catch_trials: Annotated[int, Field(ge=0)] = 0
    repeats: Annotated[int, Field(ge=0)] = 0
    max_trials: Annotated[int, Field(gt=0)] | None = None
    shuffle: bool = True
    prompt: str = ""
    classification: ClassificationSettings | None = None  # classification blocks only
    odd_one_out: OddOneOutSettings | None = None  # odd_one_out blocks only
    intro: str = Field(default="", max_length=5000)
    practice_feedback: bool = False
    cap: bool = False
    resume: ResumePolicy | None = None  # None: the [resume] table's policy


class Condition(_Strict):
    """A counterbalancing condition: its block order and an optional presentation override."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    block_order: list[str] | None = None
    presentation: Presentation | None = None


_PARAM = r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"
_URL_TEMPLATE = (r"^(https://[^\s/?#{}]+|http://(127\.0\.0\.1|localhost)(:\d+)?)"
                 r"(/[^\s#]*)?$")
_PLACEHOLDERS = {"code", "participant_id", "session_id", "study_id"}


def _check_template(value: str | None) -> str | None:
    """A completion URL template: https (http only to this machine), known ``{placeholders}``."""
    if value is None:
        return None
    names = set(re.findall(r"{([^{}]*)}", value))
    if names - _PLACEHOLDERS:
        raise ValueError(f"unknown placeholder(s) {sorted(names - _PLACEHOLDERS)}; use "
                         + ", ".join("{" + n + "}" for n in sorted(_PLACEHOLDERS)))
    return value


def _check_pattern(value: str | None) -> str | None:
    if value is not None:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from exc
    return value


class ExitOutcome(_Strict):
    """What the participant's platform gets for one way out of the study (``[completion.exits]``,
    docs/recruitment.md): Prolific a completion code (one of ``recruitment.prolific.completion_codes``,
    of a code type the exit allows), a redirect source its URL for this exit, SONA a credit decision."""

    prolific_code: str | None = Field(default=None, pattern=r"^[A-Za-z0-9]{4,32}$")
    url: Annotated[str | None, AfterValidator(_check_template)] = Field(
        default=None, max_length=2000, pattern=_URL_TEMPLATE)
    """A redirect source's URL for this exit (``{code}``, ``{participant_id}``, ``{session_id}``,
    ``{study_id}``), e.g. a panel's screen-out redirect."""
    code: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{4,64}$")
    """The fixed code ``{code}`` stands for in ``url`` (a panel's status code)."""
    credit: bool = False
    """SONA: grant the credit (the server-side completion URL is called) for this exit."""
    min_failed_catch: Annotated[int, Field(ge=1, le=1000)] | None = None
    """``failed_attention`` only: the failed catch trials (true class not rated highest) at
    completion that give this outcome instead of ``completed`` (default 2)."""


class Completion(_Strict):
    """Where a participant goes at the end, per platform, and for each other way out (``exits``)."""

    prolific_code: str | None = Field(default=None, pattern=r"^[A-Za-z0-9]{4,32}$")
    mturk_sandbox: bool = True
    exits: dict[Exit, ExitOutcome] = Field(default_factory=dict)
    """Each way out other than completing (``humanlike.server.platforms.Exit``) and what the
    platform gets for it; an exit not declared keeps the polite page that asks the participant to
    return the study by hand."""

    @model_validator(mode="after")
    def _exit_fields(self) -> Completion:
        if Exit.COMPLETED in self.exits:
            raise ValueError("exits.completed: completing is completion.prolific_code (Prolific) "
                             "or the platform's completion_url")
        for name, outcome in self.exits.items():
            if outcome.min_failed_catch is not None and name != Exit.FAILED_ATTENTION:
                raise ValueError(f"exits.{name.value}.min_failed_catch is failed_attention's")
            if outcome.code is not None and outcome.url is None:
                raise ValueError(f"exits.{name.value}.code needs url (where {{code}} goes)")
        return self


class PlatformSettings(_Strict):
    """The ``[platform]`` table: a built-in ``preset`` and any of its rules overridden (see
    docs/participant-sources.md); ``platform = "name"`` is the preset unchanged."""

    preset: Platform
    participant_param: str | None = Field(default=None, pattern=_PARAM)
    session_param: str | None = Field(default=None, pattern=_PARAM)
    study_param: str | None = Field(default=None, pattern=_PARAM)
    completion: Literal["redirect", "page"] | None = None
    completion_url: Annotated[str | None, AfterValidator(_check_template)] = Field(
        default=None, max_length=2000, pattern=_URL_TEMPLATE)
    server_completion_url: Annotated[str | None, AfterValidator(_check_template)] = Field(
        default=None, max_length=2000, pattern=_URL_TEMPLATE)
    completion_code: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{4,64}$")
    resume: Literal["same_session", "same_participant", "none"] | None = None
    sessions: Annotated[int, Field(ge=1, le=100)] | None = None
    id_pattern: Annotated[str | None, AfterValidator(_check_pattern)] = Field(
        default=None, max_length=200)

    @model_validator(mode="after")
    def _coherent(self) -> PlatformSettings:
        rules = resolve(self.model_dump(mode="json"))
        if self.preset in (Platform.PROLIFIC, Platform.MTURK, Platform.LOCAL):
            given = sorted(k for k, v in self.model_dump().items() if v is not None and k != "preset")
            if given:
                raise ValueError(f"preset {self.preset.value!r} takes no overrides ({given}): "
                                 f"write platform = {self.preset.value!r}")
        if rules.platform != Platform.LAB and rules.participant_param is None:
            raise ValueError(f"preset {self.preset.value!r} needs participant_param")
        if rules.completion == "redirect" and not rules.completion_url and not (
                rules.server_completion_url):
            raise ValueError(f"preset {self.preset.value!r} needs completion_url (or "
                             "completion = 'page')")
        if rules.server_completion_url and rules.platform != Platform.SONA:
            raise ValueError("server_completion_url is SONA's (preset = 'sona')")
        if rules.sessions > 1 and rules.platform != Platform.LAB:
            raise ValueError("sessions > 1 needs the lab page's session number (preset = 'lab')")
        if rules.resume == "same_session" and rules.platform != Platform.LAB and (
                rules.session_param is None):
            raise ValueError("resume = 'same_session' needs session_param")
        return self


class DebriefQuestion(_Strict):
    """A short free-text or choice question asked after the last trial."""

    name: str = Field(pattern=r"^[A-Za-z0-9_]{1,64}$")
    text: str
    options: list[str] | None = None


CodeAction = Literal["MANUALLY_REVIEW", "AUTOMATICALLY_APPROVE", "REQUEST_RETURN",
                     "FIXED_SCREEN_OUT_PAYMENT"]
CodeType = Literal["COMPLETED", "FAILED_ATTENTION_CHECK", "FOLLOW_UP_STUDY", "GIVE_BONUS",
                   "INCOMPATIBLE_DEVICE", "NO_CONSENT", "OTHER", "FIXED_SCREENOUT"]
"""Prolific's completion-code types (the study object, ``completion_codes[].code_type``)."""
SCREEN_OUT_MIN_REWARD = 10
"""Prolific's least fixed screen-out reward, in minor units: 10 pence (GBP; USD 14 cents)."""
Device = Literal["desktop", "tablet", "mobile"]


def _manual_review() -> list[CodeAction]:
    return ["MANUALLY_REVIEW"]


def _desktop() -> list[Device]:
    return ["desktop"]


class ProlificCompletionCode(_Strict):
    """A Prolific completion code and what Prolific does when a participant submits it."""

    code: str = Field(pattern=r"^[A-Za-z0-9]{4,32}$")
    code_type: CodeType = "COMPLETED"
    actions: list[CodeAction] = Field(default_factory=_manual_review, min_length=1)
    fixed_screen_out_reward: Annotated[int, Field(ge=SCREEN_OUT_MIN_REWARD, le=100_000)] | None = None
    """``FIXED_SCREEN_OUT_PAYMENT``: what each screened-out participant is paid (minor units)."""
    slots: Annotated[int, Field(gt=0, le=100_000)] | None = None
    """``FIXED_SCREEN_OUT_PAYMENT``: how many may be screened out before Prolific pauses the study."""

    @model_validator(mode="after")
    def _compatible(self) -> ProlificCompletionCode:
        if {"MANUALLY_REVIEW", "AUTOMATICALLY_APPROVE"} <= set(self.actions):
            raise ValueError("actions: MANUALLY_REVIEW and AUTOMATICALLY_APPROVE exclude each other")
        screen_out = "FIXED_SCREEN_OUT_PAYMENT" in self.actions
        if screen_out and (self.fixed_screen_out_reward is None or self.slots is None):
            raise ValueError("actions: FIXED_SCREEN_OUT_PAYMENT needs fixed_screen_out_reward "
                             "and slots")
        if not screen_out and (self.fixed_screen_out_reward is not None or self.slots is not None):
            raise ValueError("fixed_screen_out_reward and slots go with FIXED_SCREEN_OUT_PAYMENT")
        if screen_out and self.code_type != "FIXED_SCREENOUT":
            raise ValueError("FIXED_SCREEN_OUT_PAYMENT is for code_type 'FIXED_SCREENOUT'")
        return self


class ProlificFilter(_Strict):
    """A Prolific eligibility filter: ``selected_values`` (choice) or ``selected_range`` (range)."""

    filter_id: str = Field(min_length=1, max_length=200)
    selected_values: list[str] | None = None
    selected_range: dict[Literal["lower", "upper"], float] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> ProlificFilter:
        if (self.selected_values is None) == (self.selected_range is None):
            raise ValueError(f"filter {self.filter_id!r} needs exactly one of selected_values "
                             "or selected_range")
        return self


class ProlificRecruitment(_Strict):
    """``[recruitment.prolific]``: the draft study ``humanlike recruit prolific create`` makes."""

    name: str = Field(min_length=1, max_length=200)
    internal_name: str | None = Field(default=None, max_length=200)
    description: str = Field(min_length=1, max_length=10_000)
    reward: Annotated[int, Field(gt=0, le=100_000)]
    """Per participant, in minor units of the account's currency (pence / cents)."""
    currency: Literal["GBP", "USD"] | None = None
    """The Prolific account's currency (ISO 4217; Prolific accounts pay in GBP or USD), shown beside
    every reward, bonus and cost on the dashboard; unset, amounts say "account currency"."""
    places: Annotated[int, Field(gt=0, le=100_000)]
    estimated_minutes: Annotated[int, Field(gt=0, le=1440)]
    maximum_minutes: Annotated[int, Field(gt=0, le=1440)] | None = None
    device_compatibility: list[Device] = Field(default_factory=_desktop, min_length=1)
    filters: list[ProlificFilter] = Field(default_factory=list)
    completion_codes: list[ProlificCompletionCode] = Field(default_factory=list)
    exclude_previous: list[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")]] = Field(
        default_factory=list)
    """Slugs of experiments served here whose Prolific participants may not take part (their
    completers group blocklisted, else their studies through ``previous_studies_blocklist``)."""
    completers_group: str | None = Field(default=None, min_length=1, max_length=100,
                                         pattern=r"^\S(.*\S)?$")
    """A Prolific participant group (made at ``create`` if absent) the completion code adds
    completers to."""
    wave: Annotated[int, Field(ge=1, le=100)] | None = None
    """This experiment is wave ``wave`` of a longitudinal study (docs/recruitment.md, waves)."""
    previous_wave: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")] | None = None
    """The slug of wave ``wave - 1``: only its completers group may take this wave (allowlist)."""

    @model_validator(mode="after")
    def _waves(self) -> ProlificRecruitment:
        if (self.wave or 1) > 1 and self.previous_wave is None:
            raise ValueError(f"wave {self.wave} needs previous_wave (the slug of wave "
                             f"{self.wave - 1})")  # type: ignore[operator]
        if self.previous_wave is not None and (self.wave or 1) < 2:
            raise ValueError("previous_wave is set: give this experiment's wave (2 or more)")
        if self.previous_wave is not None and self.previous_wave in self.exclude_previous:
            raise ValueError(f"previous_wave {self.previous_wave!r} is also in exclude_previous: "
                             "its completers would be both allowed and kept out")
        return self

    @model_validator(mode="after")
    def _times(self) -> ProlificRecruitment:
        if self.maximum_minutes is not None and self.maximum_minutes < self.estimated_minutes:
            raise ValueError("maximum_minutes must be at least estimated_minutes")
        codes = [c.code for c in self.completion_codes]
        if len(set(codes)) != len(codes):
            raise ValueError("completion_codes: each code must be unique")
        if sum("FIXED_SCREEN_OUT_PAYMENT" in c.actions for c in self.completion_codes) > 1:
            raise ValueError("completion_codes: FIXED_SCREEN_OUT_PAYMENT goes on one code only")
        return self


class MTurkQualification(_Strict):
    """One MTurk qualification requirement (a system one by name, or a custom id)."""

    qualification: str = Field(min_length=1, max_length=64)
    """``approval_rate``, ``number_approved``, ``locale``, ``masters`` or a custom type id."""
    comparator: Literal["LessThan", "LessThanOrEqualTo", "GreaterThan", "GreaterThanOrEqualTo",
                        "EqualTo", "NotEqualTo", "Exists", "DoesNotExist", "In", "NotIn"] = "Exists"
    values: list[int] = Field(default_factory=list)
    locales: list[str] = Field(default_factory=list)
    """Locales as ``US`` or ``US-CA`` (country, optional subdivision)."""
    actions_guarded: Literal["Accept", "PreviewAndAccept", "DiscoverPreviewAndAccept"] = "Accept"


class MTurkRecruitment(_Strict):
    """``[recruitment.mturk]``: the HIT ``humanlike recruit mturk create`` makes."""

    sandbox: bool = True
    title: str = Field(min_length=1, max_length=128)
    description: str = Field(min_length=1, max_length=2000)
    keywords: list[str] = Field(default_factory=list)
    reward: str = Field(pattern=r"^\d{1,4}\.\d{2}$")
    """US dollars as MTurk wants them: ``"1.50"``."""
    assignments: Annotated[int, Field(gt=0, le=1_000_000)]
    duration_minutes: Annotated[int, Field(ge=1, le=365 * 24 * 60)]
    lifetime_hours: Annotated[int, Field(ge=1, le=365 * 24)] = 72
    auto_approve_hours: Annotated[int, Field(ge=0, le=30 * 24)] = 72
    frame_height: Annotated[int, Field(ge=0, le=10_000)] = 0
    qualifications: list[MTurkQualification] = Field(default_factory=list)


class Recruitment(_Strict):
    """The optional ``[recruitment]`` table: where the study is served and each platform's listing.

    Deployment settings, not the experiment's definition: excluded from the spec hash, so changing
    a reward or adding places never makes a new spec version."""

    public_url: str | None = Field(default=None, pattern=r"^https://[^\s/?#]+(/[^\s?#]*)?$")
    """The server's public HTTPS base URL; the study link is ``<public_url>/start/<slug>``."""
    prolific: ProlificRecruitment | None = None
    mturk: MTurkRecruitment | None = None


#: The ``[exclusion]`` table: QC thresholds, one definition with the analysis (a participant failing
#: any is excluded with that reason in the export; ``min_rt_ms`` is a deprecated alias).
Exclusion = ExclusionRules


class ExperimentSpec(_Strict):
    """A whole experiment (see docs/experiment-spec.md for every field)."""

    slug: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")
    title: str = Field(min_length=1, max_length=200)
    platform: Platform | PlatformSettings = Platform.LOCAL
    """A preset name, or a ``[platform]`` table (a preset with overrides)."""
    consent: str
    instructions: str
    manifest: str
    categories: list[Category] = Field(default_factory=list)
    key_mapping: Literal["fixed", "shuffled"] = "fixed"
    presentation: Presentation = Presentation()
    blocks: list[Block] = Field(min_length=1)
    conditions: list[Condition] = Field(default_factory=lambda: [Condition(name="default")])
    completion: Completion = Completion()
    debrief: list[DebriefQuestion] = Field(default_factory=list)
    exclusion: Exclusion = Exclusion()
    language: str = languages.DEFAULT
    """The participant pages' language: ``en`` or a catalogue under ``translations/``
    (docs/translations.md)."""
    allow_mobile: bool = False
    fullscreen: bool = False
    break_every: Annotated[int, Field(gt=0)] | None = None
    exclude_participants_from: list[str] = Field(default_factory=list)
    allocation_cutoff_minutes: Annotated[int, Field(gt=0, le=100_000)] = 30
    timeout_minutes: Annotated[int, Field(gt=0, le=100_000)] = 120
    recruitment: Recruitment | None = Field(default=None, exclude=True)
    """Platform listings (``humanlike recruit``); excluded from dumps and the spec hash."""
    panel: PanelSettings | None = None
    stopping: Stopping | None = None
    adaptive: AdaptiveSettings | None = None
    """Adaptive stimulus allocation (``server/live/adaptive.py``, docs/adaptive.md)."""
    display: DisplaySettings | None = None
    resume: ResumeSettings | None = None
    replication: ReplicationSettings | None = None
    """The published study this one replicates and its equivalence bounds (``humanlike
    replicate``, docs/publishing.md)."""
    privacy: Privacy = Field(default_factory=Privacy, exclude=True)
    """What is stored and for how long; a deployment setting (excluded from the spec hash)."""
    breaker: BreakerRules | None = Field(default=None, exclude=True)
    """The quality circuit breaker (``server/live/breaker.py``); excluded from the spec hash."""

    @model_validator(mode="before")
    @classmethod
    def _preset_defaults(cls, data: Any) -> Any:
        """A preset that runs full screen (lab) makes ``fullscreen`` default to true."""
        if isinstance(data, dict) and "fullscreen" not in data:
            declared = data.get("platform")
            name = declared.get("preset") if isinstance(declared, dict) else declared
            if name in set(Platform) and PRESETS[Platform(name)].fullscreen:
                data = {**data, "fullscreen": True}
        return data

    @property
    def platform_name(self) -> Platform:
        """The source's name (the preset's, for a ``[platform]`` table)."""
        return self.platform.preset if isinstance(self.platform, PlatformSettings) else self.platform

    @field_validator("language")
    @classmethod
    def _shipped_language(cls, value: str) -> str:
        if value not in languages.shipped():
            raise ValueError(f"no catalogue for language {value!r}; shipped: "
                             f"{', '.join(languages.shipped())} (docs/translations.md)")
        return value

    @field_validator("categories")
    @classmethod
    def _unique_categories(cls, value: list[Category]) -> list[Category]:
        labels = [c.label for c in value]
        keys = [c.key for c in value]
        if len(set(labels)) != len(labels):
            raise ValueError("category labels must be unique")
        if len(set(keys)) != len(keys):
            raise ValueError("category keys must be unique")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ExperimentSpec:
        names = [b.name for b in self.blocks]
        if len(set(names)) != len(names):
            raise ValueError("block names must be unique")
        needing = sorted({b.trial_type for b in self.blocks
                          if TRIAL_TYPES[b.trial_type].needs_categories})
        if needing and not self.categories:
            raise ValueError(f"{' and '.join(needing)} blocks need [[categories]]")
        labels = {c.label for c in self.categories}
        for block in self.blocks:
            accepted = TRIAL_TYPES[block.trial_type].settings
            for field, owners in block_settings().items():  # per-type settings: their types only
                if getattr(block, field, None) is not None and field not in accepted:
                    raise ValueError(f"blocks[{block.name}].{field} needs trial_type = "
                                     + " or ".join(repr(o) for o in owners))
            settings = block.classification
            unknown = sorted(set(settings.categories or []) - labels) if settings else []
            if unknown:
                raise ValueError(f"blocks[{block.name}].classification.categories: {unknown} "
                                 "are not labels of [[categories]]")
        in_degrees = [p for p in (self.presentation, *(c.presentation for c in self.conditions))
                      if p is not None and p.image_height_deg is not None]
        if in_degrees and not (self.display and self.display.calibration):
            raise ValueError("presentation.image_height_deg needs [display] calibration = true")
        cond_names = [c.name for c in self.conditions]
        if len(set(cond_names)) != len(cond_names) or not cond_names:
            raise ValueError("conditions need unique names")
        for cond in self.conditions:
            if cond.block_order is not None and sorted(cond.block_order) != sorted(names):
                raise ValueError(
                    f"conditions[{cond.name}].block_order must list each block once: {names}"
                )
        if self.platform_name == Platform.PROLIFIC and not self.completion.prolific_code:
            raise ValueError("platform 'prolific' needs completion.prolific_code")
        self._check_exits()
        if self.adaptive is not None:
            self.adaptive_block()  # raises when [adaptive] has no rating block to allocate
        return self

    def _check_exits(self) -> None:
        """Each declared exit gives the study's platform what it needs: Prolific a code of the
        type the exit allows (among ``recruitment.prolific.completion_codes`` when listed), a
        redirect source a URL (``platforms.exit_problem``)."""
        table = self.recruitment.prolific if self.recruitment else None
        listed = {c.code: c for c in (table.completion_codes if table else [])}
        rules = resolve(self.platform.model_dump(mode="json") if isinstance(
            self.platform, PlatformSettings) else self.platform.value)
        for name, outcome in self.completion.exits.items():
            where = f"completion.exits.{name.value}"
            problem = exit_problem(rules, name, outcome.model_dump())
            if problem:
                raise ValueError(f"{where}: {problem}")
            code = listed.get(outcome.prolific_code or "")
            if table is not None and rules.platform == Platform.PROLIFIC and code is None:
                raise ValueError(f"{where}.prolific_code {outcome.prolific_code!r} is not among "
                                 "recruitment.prolific.completion_codes")
            if code is not None and code.code_type not in EXIT_CODE_TYPES[name]:
                raise ValueError(f"{where}.prolific_code {code.code!r} is a {code.code_type} code; "
                                 f"this exit takes {' or '.join(sorted(EXIT_CODE_TYPES[name]))}")

    def adaptive_block(self) -> Block:
        """The rating block ``[adaptive]`` allocates (its ``block``, else the first rated one);
        ``ValueError`` when there is none, it has no ``max_trials`` or ``[panel]`` names no model
        responses."""
        assert self.adaptive is not None
        rated = [b for b in self.blocks if TRIAL_TYPES[b.trial_type].rated
                 and self.adaptive.block in (None, b.name)]
        if not rated:
            raise ValueError("adaptive.block must name a rating block" if self.adaptive.block
                             else "[adaptive] needs a rating block")
        if rated[0].max_trials is None:
            raise ValueError(f"[adaptive] needs blocks[{rated[0].name}].max_trials (the stimuli "
                             "each participant rates)")
        if self.panel is None or not self.panel.model_responses:
            raise ValueError("[adaptive] needs [panel] model_responses (the candidate models)")
        return rated[0]

    def blocks_for(self, condition: str) -> list[Block]:
        """The blocks in the order a condition shows them."""
        cond = self.condition(condition)
        if cond.block_order is None:
            return list(self.blocks)
        by_name = {b.name: b for b in self.blocks}
        return [by_name[n] for n in cond.block_order]

    def condition(self, name: str) -> Condition:
        """The condition called ``name``."""
        for cond in self.conditions:
            if cond.name == name:
                return cond
        raise KeyError(name)

    def presentation_for(self, condition: str) -> Presentation:
        """The presentation settings of a condition (its override, else the experiment's)."""
        return self.condition(condition).presentation or self.presentation

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        """As pydantic's, leaving out the optional dashboard tables when unset (so specs without
        them keep the hash they had before those tables existed)."""
        data = super().model_dump(**kwargs)
        if data.get("display") is None:  # the display table and sizes in degrees: only when set
            data.pop("display", None)
        for pres in [data.get("presentation"), *(c.get("presentation") for c in data.get("conditions", []))]:
            if isinstance(pres, dict) and pres.get("image_height_deg") is None:
                pres.pop("image_height_deg", None)
        if data.get("language") == languages.DEFAULT:  # English (the default): the older hash
            data.pop("language", None)
        for name in ("panel", "stopping", "resume", "adaptive", "replication"):
            if data.get(name) is None:
                data.pop(name, None)
        stopping = data.get("stopping")
        if isinstance(stopping, dict):  # the default monitoring keeps the hash of older specs
            if stopping.get("looks") is None:
                stopping.pop("looks", None)
            if stopping.get("monitoring") == "continuous":
                stopping.pop("monitoring", None)
            if stopping.get("test") == "betting_mixture":  # the default continuous test
                stopping.pop("test", None)
        for block in data.get("blocks") or []:
            if isinstance(block, dict) and block.get("resume") is None:
                block.pop("resume", None)
        completion = data.get("completion")
        if isinstance(completion, dict) and not completion.get("exits"):
            completion.pop("exits", None)  # no exits declared: the older hash
        exclusion = data.get("exclusion")
        if isinstance(exclusion, dict) and exclusion.get("exclude_authenticity_flagged") is False:
            exclusion.pop("exclude_authenticity_flagged")  # off (the default): the older hash
        return data

    def resume_policy(self, block: str | None) -> ResumePolicy:
        """The policy of block ``block`` (its own, else the ``[resume]`` table's, else resume)."""
        own = next((b.resume for b in self.blocks if b.name == block), None)
        return own or (self.resume.policy if self.resume else "resume")

    def canonical_json(self) -> str:
        """The spec as canonical JSON (sorted keys), the input of ``spec_hash``."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

    def spec_hash(self) -> str:
        """sha256 of the canonical JSON: changes whenever the experiment's definition changes."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()


def version_hash(spec: ExperimentSpec, texts: Mapping[str, str],
                 stimuli: Sequence[Mapping[str, Any]]) -> str:
    """sha256 of the canonical JSON of a spec version: the spec, its rendered texts, its manifest rows."""
    snapshot = {"spec": spec.model_dump(mode="json"), "texts": dict(texts), "stimuli": list(stimuli)}
    return hashlib.sha256(
        json.dumps(snapshot, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def describe_loc(loc: tuple[Any, ...], raw: Any) -> str:
    """A validation error's location as the spec's author knows it: ``blocks.0 (ratings).repeats``
    (a block by its position and, where it has one, its name); ``(top level)`` when empty."""
    parts: list[str] = []
    node = raw
    for key in loc:
        item = node[key] if isinstance(node, dict) and key in node else (
            node[key] if isinstance(node, list) and isinstance(key, int) and key < len(node)
            else None)
        if isinstance(key, int) and isinstance(item, dict) and isinstance(item.get("name"), str):
            parts.append(f"{key} ({item['name']})")
        else:
            parts.append(str(key))
        node = item
    return ".".join(parts) or "(top level)"


def _format_errors(path: Path, exc: ValidationError, raw: Any = None) -> str:
    lines = []
    for err in exc.errors():
        lines.append(f"{path}: {describe_loc(tuple(err['loc']), raw)}: {err['msg']}")
    return "\n".join(lines)


def load_spec(path: str | Path) -> ExperimentSpec:
    """Read and validate an experiment spec; raise ``SpecError`` naming the file and field."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"{path}: experiment spec not found")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}") from exc
    try:
        spec = ExperimentSpec.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(_format_errors(path, exc, raw)) from exc
    root = path.parent
    for field in ("consent", "instructions", "manifest"):
        target = (root / getattr(spec, field)).resolve()
        if not target.is_file():
            raise SpecError(f"{path}: {field}: file not found: {getattr(spec, field)}")
        if not target.is_relative_to(root.resolve()):
            raise SpecError(f"{path}: {field}: must lie inside the experiment folder")
    return spec
