//! `gitfleet history`: who changed what and when, from `git log`, as
//! semantic diffs. Objects are followed by kind and name, so moving a
//! document to another file is not an addition and a removal.

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use chrono::{DateTime, Utc};
use git2::{Oid, Sort};
use serde::Serialize;

use super::{CommitInfo, GitSource, SourceError, short_id};
use diff::specdiff::{DocSet, ObjectDiff, diff};
use load::load_fleet;
use model::spec::Kind;

/// What to walk.
#[derive(Debug, Clone, Default)]
pub struct HistoryQuery {
    /// Only this object (kind and name); every object when `None`.
    pub object: Option<(Kind, String)>,
    /// Only commits committed at or after this time (as `git log --since`).
    pub since: Option<DateTime<Utc>>,
    /// At most this many entries, the newest (as `git log -n`); all when `None`.
    pub limit: Option<usize>,
}

/// One commit that changed the fleet (or the object asked for).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryEntry {
    /// Who, when, why.
    pub commit: CommitInfo,
    /// The objects it changed, by kind then name.
    pub objects: Vec<ObjectDiff>,
    /// Set when the fleet does not validate at this commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalid: Option<Invalid>,
    /// Set when the commit's files could not be read at all; the walk goes on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The validation problems of a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Invalid {
    /// How many problems.
    pub error_count: usize,
    /// The first ones, `COMMIT:path:LINE:COL: message`.
    pub errors: Vec<String>,
}

/// How many validation errors an entry keeps.
const KEPT_ERRORS: usize = 5;
/// How far back history looks for a readable version of a broken file.
const MAX_LOOKBACK: usize = 50;
/// How many fleet versions stay parsed while walking.
const CACHED_VERSIONS: usize = 4;

/// Walks the history from `rev` (newest first, as `git log`), and lists each
/// commit that changes the fleet's documents (or the object asked for), with
/// the semantic diff against its first parent. Without an object, commits
/// after which the fleet does not validate are listed too, even without a
/// semantic change (a YAML syntax error). Merges are listed only when their
/// fleet differs from every parent's (a conflict resolution), as `git log`
/// does. A commit whose objects cannot be read becomes an entry with an
/// `error`; only a failure to walk at all is an `Err`.
pub fn history(
    source: &GitSource,
    rev: &str,
    query: &HistoryQuery,
) -> Result<Vec<HistoryEntry>, SourceError> {
    let start = source.resolve_oid(rev)?;
    let repo = source.repository();
    let walk_err = |source| SourceError::Walk {
        rev: rev.to_string(),
        cause: source,
    };
    let mut walk = repo.revwalk().map_err(walk_err)?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::TIME)
        .map_err(walk_err)?;
    walk.push(start).map_err(walk_err)?;
    let mut versions = Versions::new(source);
    let mut out = Vec::new();
    for oid in walk {
        if query.limit.is_some_and(|n| out.len() >= n) {
            break;
        }
        let oid = oid.map_err(walk_err)?;
        let commit = repo.find_commit(oid).map_err(walk_err)?;
        if let Some(since) = query.since
            && commit.committer().when().seconds() < since.timestamp()
        {
            continue;
        }
        let parents: Vec<Oid> = commit.parent_ids().collect();
        match versions.entry(oid, &parents, query) {
            Ok(Some((objects, invalid))) => out.push(HistoryEntry {
                commit: source.commit_info_at(oid)?,
                objects,
                invalid,
                error: None,
            }),
            Ok(None) => {}
            Err(err) => out.push(HistoryEntry {
                commit: source.commit_info_at(oid)?,
                objects: vec![],
                invalid: None,
                error: Some(err.to_string()),
            }),
        }
    }
    Ok(out)
}

/// Parsed versions of the fleet, by the id of its tree, a few at a time.
struct Versions<'s> {
    source: &'s GitSource,
    docs: VecDeque<(Option<Oid>, Rc<DocSet>)>,
    validity: HashMap<Option<Oid>, Option<Invalid>>,
}

impl<'s> Versions<'s> {
    fn new(source: &'s GitSource) -> Self {
        Self {
            source,
            docs: VecDeque::new(),
            validity: HashMap::new(),
        }
    }

    /// The changes of `commit` against its first parent, `None` when the
    /// commit is not listed.
    #[allow(clippy::type_complexity)]
    fn entry(
        &mut self,
        commit: Oid,
        parents: &[Oid],
        query: &HistoryQuery,
    ) -> Result<Option<(Vec<ObjectDiff>, Option<Invalid>)>, SourceError> {
        let id = self.source.fleet_id_at(commit)?;
        let parent_ids = parents
            .iter()
            .map(|p| self.source.fleet_id_at(*p))
            .collect::<Result<Vec<_>, _>>()?;
        let before_id = parent_ids.first().copied().flatten();
        if parent_ids.contains(&id) || (parents.is_empty() && id.is_none()) {
            return Ok(None); // the same fleet as a parent's: nothing to say
        }
        let after = self.docs(commit, id)?;
        let before = match parents.first() {
            Some(parent) => self.docs_readable(*parent, before_id)?,
            None => Rc::new(DocSet::default()),
        };
        let mut objects = diff(&before, &after).objects;
        if let Some((kind, name)) = &query.object {
            objects.retain(|o| o.kind == *kind && o.name == *name);
            if objects.is_empty() {
                return Ok(None);
            }
            return Ok(Some((objects, self.validity(commit, id)?)));
        }
        let invalid = self.validity(commit, id)?;
        if objects.is_empty() && invalid.is_none() {
            // comments, formatting, or a fix of an unreadable file
            let parent_invalid = match parents.first() {
                Some(parent) => self.validity(*parent, before_id)?.is_some(),
                None => false,
            };
            if !parent_invalid {
                return Ok(None);
            }
        }
        Ok(Some((objects, invalid)))
    }

    fn files(&self, commit: Oid, id: Option<Oid>) -> Result<Vec<load::SourceFile>, SourceError> {
        match id {
            None => Ok(vec![]),
            Some(_) => self
                .source
                .read_files_at(commit, short_id(&commit.to_string())),
        }
    }

    fn docs(&mut self, commit: Oid, id: Option<Oid>) -> Result<Rc<DocSet>, SourceError> {
        if let Some((_, set)) = self.docs.iter().find(|(k, _)| *k == id) {
            return Ok(set.clone());
        }
        let label = short_id(&commit.to_string()).to_string();
        let set = Rc::new(DocSet::from_files(&self.files(commit, id)?, Some(&label)));
        if self.docs.len() == CACHED_VERSIONS {
            self.docs.pop_front();
        }
        self.docs.push_back((id, set.clone()));
        Ok(set)
    }

    /// The documents at `commit`, with files that cannot be read there taken
    /// from the nearest first-parent ancestor that could read them.
    fn docs_readable(&mut self, commit: Oid, id: Option<Oid>) -> Result<Rc<DocSet>, SourceError> {
        let docs = self.docs(commit, id)?;
        if !docs.has_unreadable() {
            return Ok(docs);
        }
        let mut filled = (*docs).clone();
        let repo = self.source.repository();
        let mut cursor = commit;
        for _ in 0..MAX_LOOKBACK {
            let Ok(parent) = repo.find_commit(cursor).and_then(|c| c.parent_id(0)) else {
                break;
            };
            cursor = parent;
            let older = self.docs(cursor, self.source.fleet_id_at(cursor)?)?;
            filled.fill_unreadable_from(&older);
            if !filled.has_unreadable() {
                break;
            }
        }
        Ok(Rc::new(filled))
    }

    fn validity(&mut self, commit: Oid, id: Option<Oid>) -> Result<Option<Invalid>, SourceError> {
        if let Some(v) = self.validity.get(&id) {
            return Ok(v.clone());
        }
        let loaded = load_fleet(&self.files(commit, id)?);
        let v = (!loaded.is_valid()).then(|| Invalid {
            error_count: loaded.diagnostics.len(),
            errors: loaded
                .diagnostics
                .iter()
                .take(KEPT_ERRORS)
                .map(ToString::to_string)
                .collect(),
        });
        self.validity.insert(id, v.clone());
        Ok(v)
    }
}

/// Parses `KIND/NAME` (`queue/nlp`, `Job/train`, `priority-class/low`,
/// `PriorityClass/low`, `nodepool/h100`), the way `history` names an object.
pub fn parse_object(text: &str) -> Option<(Kind, String)> {
    let (kind, name) = text.split_once('/')?;
    let wanted: String = kind
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    let kind = Kind::ALL
        .into_iter()
        .find(|k| k.as_str().to_ascii_lowercase() == wanted)?;
    (!name.is_empty() && !name.contains('/')).then(|| (kind, name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::tests::commit;
    use git2::Repository;

    const QUEUE: &str = "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: nlp}\n\
        spec:\n  quota:\n    - {model: H100, guaranteed: 8}\n";
    const POOL: &str = "apiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: p}\n\
        spec: {gpu: {model: H100, count: 8}, size: {min: 2, max: 2}}\n";
    const JOB: &str = "apiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: train}\n\
        spec: {queue: nlp, gpusPerReplica: 8}\n";

    fn lines(entry: &HistoryEntry) -> Vec<String> {
        entry.objects.iter().flat_map(|o| o.lines()).collect()
    }

    #[test]
    fn follows_objects_across_files_and_survives_invalid_commits() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let t = 1_700_000_000;
        commit(&repo, &[("README.md", Some("hi\n"))], "readme", t);
        commit(
            &repo,
            &[
                ("fleet/pools.yaml", Some(POOL)),
                ("fleet/queues.yaml", Some(QUEUE)),
            ],
            "pools and queues",
            t + 10,
        );
        commit(&repo, &[("fleet/a.yaml", Some(JOB))], "add train", t + 20);
        commit(
            &repo,
            &[("fleet/a.yaml", None), ("fleet/jobs/train.yaml", Some(JOB))],
            "move train",
            t + 30,
        );
        commit(
            &repo,
            &[("fleet/queues.yaml", Some("key: [broken\n"))],
            "break",
            t + 40,
        );
        commit(
            &repo,
            &[(
                "fleet/queues.yaml",
                Some(&QUEUE.replace("guaranteed: 8", "guaranteed: 16")),
            )],
            "fix and raise",
            t + 50,
        );
        commit(
            &repo,
            &[("fleet/jobs/train.yaml", None)],
            "remove train",
            t + 60,
        );
        let source = GitSource::discover(&dir.path().join("fleet")).unwrap();
        let all = history(&source, "HEAD", &HistoryQuery::default()).unwrap();
        let summaries: Vec<&str> = all.iter().map(|e| e.commit.summary.as_str()).collect();
        assert_eq!(
            summaries,
            [
                "remove train",
                "fix and raise",
                "break",
                "move train",
                "add train",
                "pools and queues"
            ]
        );
        assert_eq!(lines(&all[0]), ["job train removed"]);
        assert_eq!(lines(&all[1]), ["queue nlp: H100 guaranteed 8 → 16"]);
        assert!(all[1].invalid.is_none());
        assert!(lines(&all[2]).is_empty());
        let invalid = all[2].invalid.as_ref().unwrap();
        assert!(
            invalid.errors[0].contains(":fleet/queues.yaml:1:"),
            "{invalid:?}"
        );
        assert_eq!(
            lines(&all[3]),
            ["job train moved from fleet/a.yaml to fleet/jobs/train.yaml"]
        );
        assert_eq!(lines(&all[4]), ["job train added"]);
        assert_eq!(lines(&all[5]), ["node pool p added", "queue nlp added"]);

        let query = HistoryQuery {
            object: parse_object("job/train"),
            since: None,
            limit: None,
        };
        let train = history(&source, "HEAD", &query).unwrap();
        let summaries: Vec<&str> = train.iter().map(|e| e.commit.summary.as_str()).collect();
        assert_eq!(summaries, ["remove train", "move train", "add train"]);

        let recent = HistoryQuery {
            object: None,
            since: DateTime::from_timestamp(t + 45, 0),
            limit: None,
        };
        assert_eq!(history(&source, "HEAD", &recent).unwrap().len(), 2);

        let newest = HistoryQuery {
            limit: Some(2),
            ..HistoryQuery::default()
        };
        let two = history(&source, "HEAD", &newest).unwrap();
        assert_eq!(two, all[..2]);
    }

    #[test]
    fn object_names() {
        assert_eq!(parse_object("queue/nlp"), Some((Kind::Queue, "nlp".into())));
        assert_eq!(
            parse_object("priority-class/low"),
            Some((Kind::PriorityClass, "low".into()))
        );
        assert_eq!(
            parse_object("NodePool/h100"),
            Some((Kind::NodePool, "h100".into()))
        );
        assert_eq!(parse_object("fleet/jobs"), None);
        assert_eq!(parse_object("nlp"), None);
    }
}
