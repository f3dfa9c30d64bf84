from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.command_args import dump, study_arg, user_arg
from annotations.models import Study, User
from common.errors import WorkbenchError
from generation.services import generation_job_run, model_spec_from_dict
from labelling.services import labelling_job_run
from mitigation.models import MitigationLoop, MitigationStep
from mitigation.selectors import (
    intermit_params_parse,
    intermit_plan,
    labeller_by_name,
    mitigation_loop_report,
)
from mitigation.services import (
    mitigation_loop_create,
    mitigation_loop_label_initial,
    mitigation_step_advance,
    mitigation_step_start,
)


class Command(BaseCommand):
    help = (
        "InterMit (BiasConnect): with --axes/--weights/--epsilon, tau of a prompt group and the next axis "
        "with its gamma; --start --model M [--labeller L] makes it a loop; --loop ID shows a loop's report; "
        "--step runs its next step here (generate the mitigation set, label it, recompute), --run repeats "
        "steps until tau <= epsilon or no axis is left, --close records an open step with people's labels."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument("--axes", help="B*, comma-separated (e.g. gender,age)")
        parser.add_argument("--weights", help="p, comma-separated, one per axis (default: equal)")
        parser.add_argument("--epsilon", type=float, help="Stop when tau <= epsilon (default 0.35)")
        parser.add_argument(
            "--targets",
            help="D*: AXIS=SHARE,SHARE,...;AXIS=... one share per option (an axis left out: uniform)",
        )
        parser.add_argument("--group", help="The prompt group (occupation), needed when there are several")
        parser.add_argument("--source", default="consensus", help="Plan only: consensus | LABELLER[@VERSION]")
        parser.add_argument("--start", action="store_true", help="Create a loop with this choice")
        parser.add_argument("--labeller", help="The loop's machine labeller NAME[@VERSION] (default: people)")
        parser.add_argument("--model", help="The loop's diffusers folder or hub id")
        parser.add_argument("--steps", type=int, default=30, help="Diffusion steps")
        parser.add_argument("--guidance", type=float, default=7.5)
        parser.add_argument("--width", type=int, default=512)
        parser.add_argument("--height", type=int, default=512)
        parser.add_argument("--batch-size", type=int, default=4)
        parser.add_argument("--images-per-step", type=int, default=48)
        parser.add_argument("--seed", type=int, default=0, help="Base seed of every step's images")
        parser.add_argument("--loop", type=int, help="An existing loop's id")
        parser.add_argument("--label-initial", action="store_true", help="Label the initial images here")
        parser.add_argument("--step", action="store_true", help="Run the next step here")
        parser.add_argument("--run", action="store_true", help="Run steps until done or no axis is left")
        parser.add_argument(
            "--close", action="store_true", help="Record the open step with the labels so far"
        )
        parser.add_argument("--background", action="store_true", help="Queue the jobs for workers instead")
        parser.add_argument("--device", choices=["cuda", "mps", "cpu"])
        parser.add_argument("--owner", help="Who runs it (default: the study's owner)")
        parser.add_argument("--json", action="store_true", help="Print the whole plan or report as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        user = user_arg(options["owner"]) if options["owner"] else study.owner
        try:
            if options["loop"] is None and not options["start"]:
                self._show_plan(study, options)
                return
            loop = self._loop(study, user, options)
            if options["close"]:
                step = loop.steps.exclude(status=MitigationStep.Status.DONE).first()
                if step is None:
                    raise CommandError("no step is open")
                mitigation_step_advance(step=step, user=user, close=True)
            if options["label_initial"]:
                self._label_initial(loop, user, options)
            if options["step"] or options["run"]:
                self._steps(loop, user, options)
        except WorkbenchError as exc:
            raise CommandError(exc.message) from exc
        loop.refresh_from_db()
        self._show_report(mitigation_loop_report(loop), options["json"])

    def _params(self, study: Study, options: dict[str, Any]) -> Any:
        return intermit_params_parse(
            study,
            axes=options["axes"],
            weights=options["weights"],
            epsilon=options["epsilon"],
            group=options["group"],
            targets=options["targets"],
        )

    def _show_plan(self, study: Study, options: dict[str, Any]) -> None:
        plan = intermit_plan(study, self._params(study, options), options["source"])
        if options["json"]:
            self.stdout.write(dump(plan))
            return
        stage, step = plan["stage"], plan["plan"]
        self.stdout.write(
            f"{plan['group']}: tau = {_num(step['tau'])} (epsilon {plan['epsilon']}) from {plan['source']}, "
            f"{stage['n_base_images']} base images of {stage['n_items']} items"
        )
        for axis, weight in plan["weights"].items():
            target = plan["targets"][axis]
            goal = (
                "uniform"
                if target["uniform"]
                else ", ".join(f"{option} {share:.3f}" for option, share in target["pairs"])
            )
            self.stdout.write(
                f"  {axis}: p = {weight:.3f}, w_bar = {_num(stage['w_bar'].get(axis))} "
                f"(n = {stage['n_images_per_axis'].get(axis, 0)}; D* {goal})"
            )
        if step["done"]:
            self.stdout.write("  tau <= epsilon: nothing to mitigate")
        elif step["next_axis"]:
            gammas = ", ".join(f"{a} {_num(g)}" for a, g in step["gammas"].items())
            self.stdout.write(
                f"  next axis: {step['next_axis']} (gamma {_num(step['gamma'])}; every gamma: {gammas})"
            )
            self.stdout.write("  run it: --start --model MODEL [--labeller NAME], then --loop ID --run")
        else:
            self.stdout.write(f"  {step['reason']}")
        for warning in plan["warnings"]:
            self.stdout.write(f"  warning: {warning}")

    def _loop(self, study: Study, user: User, options: dict[str, Any]) -> MitigationLoop:
        if options["loop"] is not None:
            loop = (
                MitigationLoop.objects.select_related("study", "annotator")
                .filter(pk=options["loop"], study=study)
                .first()
            )
            if loop is None:
                raise CommandError(f"no loop {options['loop']} in study {study.pk}")
            return loop
        if not options["model"]:
            raise CommandError(
                "a loop needs --model (the diffusers folder or hub id each step generates with)"
            )
        spec = model_spec_from_dict(
            {
                "source": options["model"],
                "steps": options["steps"],
                "guidance": options["guidance"],
                "width": options["width"],
                "height": options["height"],
                "batch_size": options["batch_size"],
            }
        )
        loop = mitigation_loop_create(
            study=study,
            params=self._params(study, options),
            spec=spec,
            user=user,
            annotator=labeller_by_name(options["labeller"]),
            images_per_step=options["images_per_step"],
            base_seed=options["seed"],
        )
        self.stderr.write(f"loop {loop.pk} created")
        return loop

    def _label_initial(self, loop: MitigationLoop, user: User, options: dict[str, Any]) -> None:
        job = mitigation_loop_label_initial(loop=loop, user=user, enqueue=options["background"])
        if options["background"]:
            self._wait(lambda: type(job).objects.get(pk=job.pk).is_active)
        else:
            labelling_job_run(job_id=job.pk)
        self.stderr.write(f"initial images labelled (job {job.pk})")

    def _steps(self, loop: MitigationLoop, user: User, options: dict[str, Any]) -> None:
        while True:
            report = mitigation_loop_report(loop)
            if (
                report["status"] == "needs_labels"
                and loop.annotator is not None
                and loop.initial_labelling_job is None
            ):
                self._label_initial(loop, user, options)
                loop.refresh_from_db()
                continue
            if report["status"] != "ready":
                if options["step"] and not options["run"]:
                    raise CommandError(
                        f"no step can start ({report['status']}): {report['plan']['reason'] or ''}"
                    )
                return
            step = mitigation_step_start(loop=loop, user=user, enqueue=options["background"])
            self.stderr.write(f"step {step.index}: mitigating {step.axis} (tau before {step.tau_before:.4f})")
            self._finish(step, user, options)
            if not options["run"]:
                return

    def _finish(self, step: MitigationStep, user: User, options: dict[str, Any]) -> None:
        """Run the step's jobs here (or wait for the workers) and advance it after each."""
        if options["background"]:
            self._wait(
                lambda: (
                    MitigationStep.objects.get(pk=step.pk).status
                    in (MitigationStep.Status.GENERATING, MitigationStep.Status.LABELLING)
                )
            )
        else:
            assert step.generation_job_id is not None
            generation_job_run(job_id=step.generation_job_id, device=options["device"], any_folder=True)
            step = mitigation_step_advance(step=step, user=user, enqueue=False)
            if step.labelling_job_id is not None and step.status == MitigationStep.Status.LABELLING:
                labelling_job_run(job_id=step.labelling_job_id)
                step = mitigation_step_advance(step=step, user=user, enqueue=False)
        step.refresh_from_db()
        if step.status == MitigationStep.Status.AWAITING_LABELS:
            self.stderr.write(
                f"step {step.index}: {step.items_made} images wait for labels; label them, then --loop "
                f"{step.loop_id} --close"
            )
            raise CommandError(f"step {step.index} waits for labels")
        if step.status != MitigationStep.Status.DONE:
            raise CommandError(f"step {step.index} stopped while {step.get_status_display().lower()}")
        self.stderr.write(f"step {step.index}: tau after {step.tau_after:.4f}")

    def _wait(self, active: Any) -> None:
        while active():
            time.sleep(2)

    def _show_report(self, report: dict[str, Any], as_json: bool) -> None:
        if as_json:
            self.stdout.write(dump(report))
            return
        self.stdout.write(
            f"loop {report['loop']} ({report['group']}, B* = {', '.join(report['axes'])}, "
            f"epsilon {report['epsilon']}, "
            f"labels from {report['source']}): {report['status']}"
        )
        plan = report["plan"]
        self.stdout.write(f"  current set {report['current_stage']}: tau = {_num(plan['tau'])}")
        if report["status"] == "ready":
            self.stdout.write(f"  next axis: {plan['next_axis']} (gamma {_num(plan['gamma'])})")
        elif plan["reason"]:
            self.stdout.write(f"  {plan['reason']}")
        for step in report["steps"]:
            self.stdout.write(
                f"  step {step['index']}: {step['axis']}, "
                f"tau {_num(step['tau_before'])} -> {_num(step['tau_after'])}, "
                f"{step['items_made']} items, {step['status']}, "
                f"by {step['created_by']} at {step['created_at']}"
            )
        summary = report["report"]
        self.stdout.write(
            f"  MitAmt {_num(summary['mit_amt'])}, MitSteps {_num(summary['mit_steps'])} "
            f"({summary['steps']}/{summary['n_axes']})"
        )
        validation = report["validation"]
        self.stdout.write(
            f"  validation: r = {_num(validation['r'])} over {validation['n']} cells"
            + (f" ({validation['reason']})" if validation["reason"] else "")
        )
        for warning in report["warnings"]:
            self.stdout.write(f"  warning: {warning}")


def _num(value: Any) -> str:
    return "undefined" if value is None else f"{value:.4f}"
