// SPDX-License-Identifier: LGPL-3.0-or-later
//! What the simulated clients ask: random RADOS ops as real `OSDOp`s (the encodings librados uses), and the
//! parsing of their replies back into the oracle's model.

use bytes::Bytes;
use ceph_msgs::osd_op::{MOSDOpReply, OSDOp, XattrArgs, flag, op};
use denc::{Decoder, Encoder};
use ferrostore::rng::Rng;

use crate::oracle::{Mutation, ObjState};

/// A client op before it is put on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpKind {
    /// Mutations applied atomically (one MOSDOp).
    Write(Vec<Mutation>),
    /// `read 0~0` (whole object), `getxattrs`, `omap-get-vals` in one MOSDOp: one consistent snapshot.
    Read,
}

impl OpKind {
    pub fn describe(&self) -> String {
        match self {
            OpKind::Read => "read+getxattrs+omap-get-vals".into(),
            OpKind::Write(ms) => ms.iter().map(|m| m.to_string()).collect::<Vec<_>>().join("+"),
        }
    }
}

fn payload(rng: &mut Rng, max: u64) -> Vec<u8> {
    let n = 1 + rng.below(max) as usize;
    let mut v = vec![0u8; n];
    rng.fill(&mut v);
    v
}

/// A random op: reads about 40% of the time; writes mix data, xattr and omap changes, deletes now and then.
pub fn random_op(rng: &mut Rng) -> OpKind {
    if rng.chance(40) {
        return OpKind::Read;
    }
    if rng.chance(8) {
        return OpKind::Write(vec![Mutation::Delete]);
    }
    let n = 1 + rng.below(3);
    let mut ms = Vec::new();
    for _ in 0..n {
        let m = match rng.below(7) {
            0 => Mutation::WriteFull(payload(rng, 1500)),
            1 | 2 => Mutation::Write {
                off: rng.below(3000),
                data: payload(rng, 1200),
            },
            3 => Mutation::Append(payload(rng, 600)),
            4 => Mutation::SetXattr(format!("x{}", rng.below(4)), payload(rng, 40)),
            5 => Mutation::OmapSet(
                (0..1 + rng.below(3))
                    .map(|_| (format!("k{:02}", rng.below(12)), payload(rng, 60)))
                    .collect(),
            ),
            _ => Mutation::OmapRm(
                (0..1 + rng.below(2))
                    .map(|_| format!("k{:02}", rng.below(12)))
                    .collect(),
            ),
        };
        ms.push(m);
    }
    OpKind::Write(ms)
}

fn string(e: &mut Encoder, s: &str) {
    e.bytes(s.as_bytes());
}

/// The `OSDOp`s and MOSDOp flags for an op.
pub fn osd_ops(kind: &OpKind) -> (Vec<OSDOp>, u32) {
    match kind {
        OpKind::Read => {
            let mut e = Encoder::new(0);
            string(&mut e, "");
            e.u64(1024);
            string(&mut e, "");
            (
                vec![
                    OSDOp::new(op::READ).with_extent(0, 0),
                    OSDOp::new(op::GETXATTRS),
                    OSDOp::new(op::OMAPGETVALS).with_indata(e.into_bytes()),
                ],
                flag::READ,
            )
        }
        OpKind::Write(ms) => {
            let ops = ms
                .iter()
                .map(|m| match m {
                    Mutation::WriteFull(d) => OSDOp::new(op::WRITEFULL)
                        .with_extent(0, d.len() as u64)
                        .with_indata(Bytes::copy_from_slice(d)),
                    Mutation::Write { off, data } => OSDOp::new(op::WRITE)
                        .with_extent(*off, data.len() as u64)
                        .with_indata(Bytes::copy_from_slice(data)),
                    Mutation::Append(d) => OSDOp::new(op::APPEND)
                        .with_extent(0, d.len() as u64)
                        .with_indata(Bytes::copy_from_slice(d)),
                    Mutation::Delete => OSDOp::new(op::DELETE),
                    Mutation::SetXattr(k, v) => {
                        let mut o = OSDOp::new(op::SETXATTR);
                        o.set_xattr(XattrArgs {
                            name_len: k.len() as u32,
                            value_len: v.len() as u32,
                            ..XattrArgs::default()
                        });
                        let mut d = k.as_bytes().to_vec();
                        d.extend_from_slice(v);
                        o.with_indata(d)
                    }
                    Mutation::OmapSet(kv) => {
                        let mut e = Encoder::new(0);
                        e.u32(kv.len() as u32);
                        for (k, v) in kv {
                            string(&mut e, k);
                            e.bytes(v);
                        }
                        OSDOp::new(op::OMAPSETVALS).with_indata(e.into_bytes())
                    }
                    Mutation::OmapRm(ks) => {
                        // A set: sorted, no duplicates.
                        let set: std::collections::BTreeSet<&String> = ks.iter().collect();
                        let mut e = Encoder::new(0);
                        e.u32(set.len() as u32);
                        for k in set {
                            string(&mut e, k);
                        }
                        OSDOp::new(op::OMAPRMKEYS).with_indata(e.into_bytes())
                    }
                })
                .collect();
            (ops, flag::WRITE | flag::ONDISK)
        }
    }
}

fn kv_map(d: &mut Decoder, what: &str) -> Result<std::collections::BTreeMap<String, Vec<u8>>, String> {
    let n = d.u32().map_err(|e| format!("{what}: {e}"))?;
    let mut m = std::collections::BTreeMap::new();
    for _ in 0..n {
        let k = d.bufferlist().map_err(|e| format!("{what} key: {e}"))?;
        let v = d.bufferlist().map_err(|e| format!("{what} value: {e}"))?;
        m.insert(String::from_utf8_lossy(&k).into_owned(), v.to_vec());
    }
    Ok(m)
}

/// The object state a read's reply shows (`None`: the object does not exist).
pub fn parse_read(reply: &MOSDOpReply) -> Result<Option<ObjState>, String> {
    if reply.result == -2 {
        return Ok(None);
    }
    if reply.result != 0 {
        return Err(format!("read answered {}", reply.result));
    }
    let [data, xattrs, omap] = reply.ops.as_slice() else {
        return Err(format!("read reply with {} ops", reply.ops.len()));
    };
    let xattrs = kv_map(&mut Decoder::new(xattrs.outdata.clone()), "getxattrs")?;
    let mut d = Decoder::new(omap.outdata.clone());
    let omap_vals = kv_map(&mut d, "omap-get-vals")?;
    let more = d.u8().map_err(|e| format!("omap-get-vals: {e}"))?;
    if more != 0 {
        return Err("omap-get-vals truncated below 1024 keys".into());
    }
    Ok(Some(ObjState {
        data: data.outdata.to_vec(),
        xattrs,
        omap: omap_vals,
    }))
}
