//! The `mesh_spec` target: mesh specifications.

use super::shared::ok;

/// Mesh specification parsers (`MeshSpec::parse`, `ViewSpec::parse`,
/// `FlattenSpec::parse`, the CLI's `--mesh`, `--view`, `--flatten`): the
/// bytes as text, split at newlines into a mesh, views and flattens
/// (a first `!` line asks for DeviceMesh's order).
///
/// Nothing panics; a refusal is a typed error with a message. A mesh that
/// builds answers every dim set of its own and of its views as the
/// definition says for a few ranks: each rank is in the group its split
/// names, at its key, and groups fill what they iterate.
pub fn mesh_spec(data: &[u8]) {
    use rank_layout::{Mesh, MeshSpec};
    let text = String::from_utf8_lossy(data);
    let mut lines = text.lines();
    let Some(first) = lines.next() else {
        return;
    };
    let (device, first) = match first.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, first),
    };
    let parsed = if device {
        MeshSpec::parse_device_mesh(first)
    } else {
        MeshSpec::parse(first)
    };
    let mut spec = match parsed {
        Ok(spec) => spec,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    for line in lines {
        // A view names itself before ':', a flatten before '='.
        let is_view = match (line.find(':'), line.find('=')) {
            (Some(colon), Some(equals)) => colon < equals,
            (colon, _) => colon.is_some(),
        };
        let next = if is_view {
            spec.clone().view(line)
        } else {
            spec.clone().flatten(line)
        };
        match next {
            Ok(s) => spec = s,
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
    let mesh: Mesh = match spec.build() {
        Ok(mesh) => mesh,
        Err(e) => {
            assert!(!e.to_string().is_empty(), "{text:?}");
            return;
        }
    };
    let world = mesh.world_size();
    let mut specs: Vec<String> = mesh.dims().map(|(n, _)| n.to_owned()).collect();
    for view in mesh.views().map(str::to_owned).collect::<Vec<_>>() {
        let dims: Vec<String> = ok(mesh.view_dims(&view), || view.clone())
            .map(|(n, _)| n.to_owned())
            .collect();
        specs.push(format!("{view}:{}", dims.join("-")));
        specs.extend(dims.iter().map(|d| format!("{view}:{d}")));
    }
    specs.extend(mesh.flattens().map(|(n, _)| n.to_owned()));
    let sample = [0, world / 2, world.saturating_sub(1)];
    for s in &specs {
        let groups = ok(mesh.groups(s), || s.clone());
        let len = groups.group_len().unwrap_or(0);
        assert_eq!(groups.len() * len, world as usize, "{text:?} {s}");
        for p in sample {
            let rank = mesh.rank_offset() + p;
            let split = ok(mesh.split(rank, s), || format!("{s} {rank}"));
            let group = ok(mesh.groups(s), || s.clone())
                .nth(split.color as usize)
                .unwrap();
            assert_eq!(group.get(split.key as usize), Some(rank), "{text:?} {s}");
        }
        if world <= 4096 {
            let mut buf = vec![0u32; world as usize];
            ok(ok(mesh.groups(s), || s.clone()).fill(&mut buf), || {
                s.clone()
            });
            let listed: Vec<u32> = ok(mesh.groups(s), || s.clone())
                .flat_map(|g| g.to_vec())
                .collect();
            assert_eq!(buf, listed, "{text:?} {s}");
        }
    }
}
