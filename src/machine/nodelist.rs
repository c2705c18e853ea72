//! The job's hosts out of a table of the whole cluster: a Slurm nodelist.

use crate::error::{Error, Result};
use crate::machine::hosts::{Host, Hosts, bad, expand_at};

/// The most missing hosts a note names (the rest are counted).
const NAMED: usize = 8;

impl Hosts {
    /// [`Hosts::restrict_to`], with the note on the hosts of `nodelist` this
    /// table lacks (`None` when it has them all).
    ///
    /// # Errors
    /// As [`Hosts::restrict_to`]: a bad expression, a host named twice, no
    /// host of the nodelist in the table.
    pub(crate) fn restrict(&self, nodelist: &str) -> Result<(Hosts, Option<String>)> {
        let mut listed = 0;
        let names = expand_at(1, nodelist.trim(), &mut listed).map_err(|e| match e {
            Error::BadHostTable {
                line,
                text,
                problem,
                ..
            } => bad(line, &text, &format!("the nodelist: {problem}")),
            other => other,
        })?;
        let mut missing = Vec::new();
        let rows = names
            .into_iter()
            .map(|name| {
                let host = match self.index_of(&name).and_then(|i| self.get(i)) {
                    Some(host) => host.clone(),
                    None => {
                        missing.push(name.clone());
                        Host::new(name, None)
                    }
                };
                (1, host)
            })
            .collect::<Vec<_>>();
        if !rows.is_empty() && missing.len() == rows.len() {
            return Err(bad(
                1,
                nodelist,
                &format!(
                    "no host of the nodelist is in the host table ({} listed, the table has {}: {})",
                    rows.len(),
                    self.len(),
                    named(self.iter().map(|h| h.name.as_str()).collect(), self.len())
                ),
            ));
        }
        let hosts = Hosts::checked(rows)?;
        let note = (!missing.is_empty()).then(|| {
            format!(
                "nodelist: {} host(s) not in the host table, placed with an unknown domain: {}",
                missing.len(),
                named(missing.iter().map(String::as_str).collect(), missing.len())
            )
        });
        Ok((hosts, note))
    }
}

/// The first few of `names` (of `count`), and how many more.
fn named(names: Vec<&str>, count: usize) -> String {
    let shown: Vec<&str> = names.into_iter().take(NAMED).collect();
    if count > shown.len() {
        format!("{} and {} more", shown.join(", "), count - shown.len())
    } else {
        shown.join(", ")
    }
}
