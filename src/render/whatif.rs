//! `plan --suggest`: the plan with what would let its pending jobs run.
//! Text and Markdown are the plan's with one more section; the JSON is the
//! plan's with two more fields on pending entries (`suggestions`,
//! `expected_start`), every other byte as `plan -o json` writes it.

use std::io::Write;

use miette::Result;
use reconciler::model::plan::{Action, Drift, PLAN_FORMAT_VERSION, Pending, Summary};
use reconciler::report::whatif_plan_text;
use reconciler::whatif::{ExpectedStart, Suggestion, WhatIf};
use serde::Serialize;

use super::{PlanReport, Render};

/// A plan and its what-if answers.
pub struct SuggestedPlanReport<'a> {
    /// The plan as `plan` prints it.
    pub report: PlanReport<'a>,
    /// Suggestions and expected starts of its pending jobs.
    pub whatif: &'a WhatIf,
}

impl SuggestedPlanReport<'_> {
    fn section(&self, markdown: bool) -> String {
        let order = self.report.plan.pending.iter().map(|p| &*p.job);
        whatif_plan_text(self.whatif, order, markdown)
    }
}

impl Render for SuggestedPlanReport<'_> {
    fn text(&self) -> String {
        self.report.text() + &self.section(false)
    }

    fn markdown(&self) -> Result<String> {
        Ok(self.report.markdown()? + &self.section(true))
    }

    fn json<W: Write>(&self, out: W) -> serde_json::Result<()> {
        let plan = self.report.plan;
        let json = PlanJson {
            format_version: PLAN_FORMAT_VERSION,
            revision: &plan.revision,
            time: &plan.time,
            actions: &plan.actions,
            pending: plan
                .pending
                .iter()
                .map(|p| PendingJson {
                    pending: p,
                    suggestions: self.whatif.suggestions.get(&*p.job),
                    expected_start: self.whatif.starts.get(&*p.job),
                })
                .collect(),
            summary: &plan.summary,
            drift: &plan.drift,
        };
        serde_json::to_writer_pretty(out, &json)
    }
}

/// `model::plan::Plan`'s fields in its order (a test compares the two
/// outputs, so a field added to the plan cannot be missed here).
#[derive(Serialize)]
struct PlanJson<'a> {
    format_version: u32,
    revision: &'a Option<String>,
    time: &'a str,
    actions: &'a [Action],
    pending: Vec<PendingJson<'a>>,
    summary: &'a Summary,
    drift: &'a [Drift],
}

#[derive(Serialize)]
struct PendingJson<'a> {
    #[serde(flatten)]
    pending: &'a Pending,
    #[serde(skip_serializing_if = "Option::is_none")]
    suggestions: Option<&'a Vec<Suggestion>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected_start: Option<&'a ExpectedStart>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // tests may stop at the first surprise

    use reconciler::model::plan::Plan;

    use super::*;

    fn json(value: &impl Render) -> String {
        let mut out = Vec::new();
        value.json(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Every field of the plan, each kind of action and a pending entry
    /// with and without its optional fields.
    fn plan() -> Plan {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/cases/plan/preempt-same-queue-priority/expected.json"
        );
        let mut plan: Plan = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        plan.revision = Some("abc".into());
        plan
    }

    #[test]
    fn without_answers_the_json_is_the_plans_byte_for_byte() {
        let plan = plan();
        assert!(!plan.pending.is_empty() && !plan.actions.is_empty());
        let report = || PlanReport {
            plan: &plan,
            source: "fleet",
        };
        let whatif = WhatIf::default();
        assert_eq!(
            json(&SuggestedPlanReport {
                report: report(),
                whatif: &whatif
            }),
            json(&report())
        );
    }

    #[test]
    fn answers_are_two_more_fields_of_pending_entries() {
        let plan = plan();
        let job = plan.pending[0].job.clone();
        let mut whatif = WhatIf::default();
        whatif.suggestions.insert(job.to_string(), Vec::new());
        let report = SuggestedPlanReport {
            report: PlanReport {
                plan: &plan,
                source: "fleet",
            },
            whatif: &whatif,
        };
        let value: serde_json::Value = serde_json::from_str(&json(&report)).unwrap();
        assert_eq!(value["pending"][0]["job"], &*job);
        assert_eq!(value["pending"][0]["suggestions"], serde_json::json!([]));
        assert!(value["pending"][0].get("expected_start").is_none());
        assert!(
            report
                .text()
                .contains(&format!("  {job}\n    - none found"))
        );
    }
}
