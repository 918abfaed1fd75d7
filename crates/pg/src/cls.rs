// SPDX-License-Identifier: LGPL-3.0-or-later
//! Object classes `lock` and `version`, with the behaviour (return codes, stored formats) of Ceph's
//! src/cls/lock and src/cls/version. Other classes answer EOPNOTSUPP, as an OSD without them loaded does.
//!
//! A lock lives in the user xattr `lock.<name>` as `lock_info_t`; a version in `ceph.objclass.version` as
//! `obj_version`. The methods reach the object only through [`ClsHost`], which runs the same GETXATTR/SETXATTR
//! paths a client op would (so reads see the object as it was before the op, writes join the op's transaction).

use std::collections::BTreeMap;

use bytes::Bytes;
use denc::{Decode, DecodeError, Decoder, Encode, Encoder, EntityAddr, EntityNameT, Utime};

pub(crate) const CLS_METHOD_RD: u8 = 1;
pub(crate) const CLS_METHOD_WR: u8 = 2;

/// What a class method may do to the object it runs on.
pub(crate) trait ClsHost {
    /// A user xattr (no `_` prefix); Err(-ENOENT) if the object does not exist, Err(-ENODATA) if unset.
    fn getxattr(&mut self, name: &[u8]) -> Result<Bytes, i32>;
    fn setxattr(&mut self, name: &[u8], v: Bytes) -> Result<(), i32>;
    fn getxattrs(&mut self) -> Result<BTreeMap<Bytes, Bytes>, i32>;
    fn remove(&mut self) -> Result<(), i32>;
    fn origin(&self) -> (EntityNameT, EntityAddr);
    fn now(&self) -> Utime;
    fn client_features(&self) -> u64;
    fn random_bytes(&mut self, out: &mut [u8]);
}

/// Pacific's default `osd_class_load_list`: the classes a ceph-osd 16.2 may load.
pub(crate) const OSD_CLASS_LOAD_LIST: &[&[u8]] = &[
    b"cephfs",
    b"hello",
    b"journal",
    b"lock",
    b"log",
    b"numops",
    b"otp",
    b"rbd",
    b"refcount",
    b"rgw",
    b"rgw_gc",
    b"timeindex",
    b"user",
    b"version",
    b"cas",
    b"cmpomap",
    b"queue",
    b"2pc_queue",
    b"fifo",
];

/// The error a CALL of an unknown class or method gets before anything else (`OpInfo::set_from_op`):
/// `ClassHandler::open_class` refuses a class outside `osd_class_load_list` with -EPERM (passed on as is); a
/// listed class we do not implement is one whose library is absent (-ENOENT, answered -EOPNOTSUPP), as is an
/// unknown method of a class we do implement.
pub(crate) fn unknown_call_errno(class: &[u8]) -> i32 {
    if OSD_CLASS_LOAD_LIST.contains(&class) {
        -libc::EOPNOTSUPP
    } else {
        -libc::EPERM
    }
}

/// Flags of a known method (`CLS_METHOD_RD | CLS_METHOD_WR`), None for unknown classes or methods.
pub(crate) fn method_flags(class: &[u8], method: &[u8]) -> Option<u8> {
    const RW: u8 = CLS_METHOD_RD | CLS_METHOD_WR;
    match (class, method) {
        (b"lock", b"lock" | b"unlock" | b"break_lock" | b"set_cookie") => Some(RW),
        (b"lock", b"get_info" | b"list_locks" | b"assert_locked") => Some(CLS_METHOD_RD),
        (b"version", b"set" | b"inc" | b"inc_conds") => Some(RW),
        (b"version", b"read" | b"check_conds") => Some(CLS_METHOD_RD),
        _ => None,
    }
}

/// Run a method. `Ok(out)` is the method's output; `Err(r)` its (negative) return code.
pub(crate) fn call(h: &mut dyn ClsHost, class: &[u8], method: &[u8], input: Bytes) -> Result<Bytes, i32> {
    match (class, method) {
        (b"lock", b"lock") => lock_op(h, input),
        (b"lock", b"unlock") => unlock_op(h, input),
        (b"lock", b"break_lock") => break_lock(h, input),
        (b"lock", b"get_info") => get_info(h, input),
        (b"lock", b"list_locks") => list_locks(h),
        (b"lock", b"assert_locked") => assert_locked(h, input),
        (b"lock", b"set_cookie") => set_cookie(h, input),
        (b"version", b"set") => version_set(h, input),
        (b"version", b"inc" | b"inc_conds") => version_inc(h, input),
        (b"version", b"read") => version_read(h),
        (b"version", b"check_conds") => version_check(h, input),
        _ => Err(-libc::EOPNOTSUPP),
    }
}

fn einval(_: DecodeError) -> i32 {
    -libc::EINVAL
}

// ------------------------------------------------------------------ lock

const LOCK_PREFIX: &[u8] = b"lock.";
const LOCK_NONE: u8 = 0;
const LOCK_EXCLUSIVE: u8 = 1;
const LOCK_SHARED: u8 = 2;
const LOCK_EXCLUSIVE_EPHEMERAL: u8 = 3;
const LOCK_FLAG_MAY_RENEW: u8 = 1;
const LOCK_FLAG_MUST_RENEW: u8 = 2;

fn is_valid(t: u8) -> bool {
    matches!(t, LOCK_EXCLUSIVE | LOCK_SHARED | LOCK_EXCLUSIVE_EPHEMERAL)
}
fn is_exclusive(t: u8) -> bool {
    matches!(t, LOCK_EXCLUSIVE | LOCK_EXCLUSIVE_EPHEMERAL)
}

/// `locker_id_t`, ordered as Ceph orders it (locker, then cookie).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct LockerId {
    pub locker: EntityNameT,
    pub cookie: Bytes,
}
impl Encode for LockerId {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            e.encode(&self.locker);
            e.bytes(&self.cookie);
        })
    }
}
impl Decode for LockerId {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("locker_id_t", 1, |_, d| {
            Ok(LockerId {
                locker: d.decode()?,
                cookie: d.bufferlist()?,
            })
        })
    }
}

/// `locker_info_t`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct LockerInfo {
    pub expiration: Utime,
    pub addr: EntityAddr,
    pub description: Bytes,
}
impl Encode for LockerInfo {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            e.encode(&self.expiration);
            e.encode(&self.addr);
            e.bytes(&self.description);
        })
    }
}
impl Decode for LockerInfo {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("locker_info_t", 1, |_, d| {
            Ok(LockerInfo {
                expiration: d.decode()?,
                addr: d.decode()?,
                description: d.bufferlist()?,
            })
        })
    }
}

/// `lock_info_t` (and, with the same layout, `cls_lock_get_info_reply`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct LockInfo {
    pub lockers: BTreeMap<LockerId, LockerInfo>,
    pub lock_type: u8,
    pub tag: Bytes,
}
impl Encode for LockInfo {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            e.encode(&self.lockers);
            e.u8(self.lock_type);
            e.bytes(&self.tag);
        })
    }
}
impl Decode for LockInfo {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("lock_info_t", 1, |_, d| {
            Ok(LockInfo {
                lockers: d.decode()?,
                lock_type: d.u8()?,
                tag: d.bufferlist()?,
            })
        })
    }
}

fn lock_key(name: &[u8]) -> Vec<u8> {
    let mut k = LOCK_PREFIX.to_vec();
    k.extend_from_slice(name);
    k
}

fn utime_add(a: Utime, b: Utime) -> Utime {
    let mut nsec = u64::from(a.nsec) + u64::from(b.nsec);
    let mut sec = u64::from(a.sec) + u64::from(b.sec);
    if nsec >= 1_000_000_000 {
        nsec -= 1_000_000_000;
        sec += 1;
    }
    Utime::new(sec.min(u64::from(u32::MAX)) as u32, nsec as u32)
}

fn read_lock(h: &mut dyn ClsHost, name: &[u8]) -> Result<LockInfo, i32> {
    let bl = match h.getxattr(&lock_key(name)) {
        Ok(b) => b,
        Err(e) if e == -libc::ENODATA => return Ok(LockInfo::default()),
        Err(e) => return Err(e),
    };
    let mut li = LockInfo::decode_all(bl).map_err(|_| -libc::EIO)?;
    let now = h.now();
    li.lockers
        .retain(|_, i| i.expiration.is_zero() || i.expiration >= now);
    if li.lockers.is_empty() && li.lock_type == LOCK_EXCLUSIVE_EPHEMERAL {
        // Ceph removes the object here and ignores a failure
        let _ = h.remove();
    }
    Ok(li)
}

fn write_lock(h: &mut dyn ClsHost, name: &[u8], li: &LockInfo) -> Result<(), i32> {
    let mut e = Encoder::new(h.client_features());
    li.encode(&mut e);
    h.setxattr(&lock_key(name), e.into_bytes())
}

#[allow(clippy::too_many_arguments)]
fn lock_obj(
    h: &mut dyn ClsHost,
    name: &[u8],
    lock_type: u8,
    duration: Utime,
    description: Bytes,
    flags: u8,
    cookie: Bytes,
    tag: Bytes,
) -> Result<Bytes, i32> {
    let exclusive = is_exclusive(lock_type);
    let fail_if_exists = flags & LOCK_FLAG_MAY_RENEW == 0;
    let fail_if_does_not_exist = flags & LOCK_FLAG_MUST_RENEW != 0;
    if !is_valid(lock_type) || name.is_empty() {
        return Err(-libc::EINVAL);
    }
    if !fail_if_exists && fail_if_does_not_exist {
        return Err(-libc::EINVAL);
    }
    let mut li = match read_lock(h, name) {
        Ok(l) => l,
        Err(e) if e == -libc::ENOENT => LockInfo::default(),
        Err(e) => return Err(e),
    };
    let (who, mut addr) = h.origin();
    let id = LockerId { locker: who, cookie };
    if !li.lockers.is_empty() && tag != li.tag {
        return Err(-libc::EBUSY);
    }
    let existing_type = li.lock_type;
    if li.lockers.contains_key(&id) {
        if fail_if_exists && !fail_if_does_not_exist {
            return Err(-libc::EEXIST);
        }
        li.lockers.remove(&id);
    } else if fail_if_does_not_exist {
        return Err(-libc::ENOENT);
    }
    if !li.lockers.is_empty() && (exclusive || existing_type != lock_type) {
        return Err(-libc::EBUSY);
    }
    li.lock_type = lock_type;
    li.tag = tag;
    let expiration = if duration.is_zero() {
        Utime::default()
    } else {
        utime_add(h.now(), duration)
    };
    // Ceph stores the locker's address as a legacy one
    addr.addr_type = EntityAddr::TYPE_LEGACY;
    li.lockers.insert(
        id,
        LockerInfo {
            expiration,
            addr,
            description,
        },
    );
    write_lock(h, name, &li)?;
    Ok(Bytes::new())
}

fn lock_op(h: &mut dyn ClsHost, input: Bytes) -> Result<Bytes, i32> {
    let mut d = Decoder::new(input);
    let (name, ty, cookie, tag, description, duration, flags) = d
        .decode_struct("cls_lock_lock_op", 1, |_, d| {
            Ok((
                d.bufferlist()?,
                d.u8()?,
                d.bufferlist()?,
                d.bufferlist()?,
                d.bufferlist()?,
                d.decode::<Utime>()?,
                d.u8()?,
            ))
        })
        .map_err(einval)?;
    lock_obj(h, &name, ty, duration, description, flags, cookie, tag)
}

fn remove_lock(h: &mut dyn ClsHost, name: &[u8], locker: EntityNameT, cookie: Bytes) -> Result<Bytes, i32> {
    let mut li = read_lock(h, name)?;
    let id = LockerId { locker, cookie };
    if li.lockers.remove(&id).is_none() {
        return Err(-libc::ENOENT);
    }
    if li.lock_type == LOCK_EXCLUSIVE_EPHEMERAL {
        h.remove()?;
    } else {
        write_lock(h, name, &li)?;
    }
    Ok(Bytes::new())
}

fn unlock_op(h: &mut dyn ClsHost, input: Bytes) -> Result<Bytes, i32> {
    let mut d = Decoder::new(input);
    let (name, cookie) = d
        .decode_struct("cls_lock_unlock_op", 1, |_, d| {
            Ok((d.bufferlist()?, d.bufferlist()?))
        })
        .map_err(einval)?;
    let who = h.origin().0;
    remove_lock(h, &name, who, cookie)
}

fn break_lock(h: &mut dyn ClsHost, input: Bytes) -> Result<Bytes, i32> {
    let mut d = Decoder::new(input);
    let (name, locker, cookie) = d
        .decode_struct("cls_lock_break_op", 1, |_, d| {
            Ok((d.bufferlist()?, d.decode::<EntityNameT>()?, d.bufferlist()?))
        })
        .map_err(einval)?;
    remove_lock(h, &name, locker, cookie)
}

fn get_info(h: &mut dyn ClsHost, input: Bytes) -> Result<Bytes, i32> {
    let mut d = Decoder::new(input);
    let name = d
        .decode_struct("cls_lock_get_info_op", 1, |_, d| d.bufferlist())
        .map_err(einval)?;
    let li = read_lock(h, &name)?;
    let mut e = Encoder::new(h.client_features());
    li.encode(&mut e);
    Ok(e.into_bytes())
}

fn list_locks(h: &mut dyn ClsHost) -> Result<Bytes, i32> {
    let attrs = h.getxattrs()?;
    let locks: Vec<Bytes> = attrs
        .keys()
        .filter_map(|k| k.strip_prefix(LOCK_PREFIX).map(Bytes::copy_from_slice))
        .collect();
    let mut e = Encoder::new(0);
    e.versioned(1, 1, |e| e.encode(&locks));
    Ok(e.into_bytes())
}

/// Shared checks of assert_locked and set_cookie; returns the lock and the caller's locker id.
fn check_held(
    h: &mut dyn ClsHost,
    name: &[u8],
    ty: u8,
    cookie: Bytes,
    tag: &Bytes,
) -> Result<(LockInfo, LockerId), i32> {
    if !is_valid(ty) || name.is_empty() {
        return Err(-libc::EINVAL);
    }
    let li = read_lock(h, name)?;
    if li.lockers.is_empty() || li.lock_type != ty || li.tag != *tag {
        return Err(-libc::EBUSY);
    }
    let id = LockerId {
        locker: h.origin().0,
        cookie,
    };
    if !li.lockers.contains_key(&id) {
        return Err(-libc::EBUSY);
    }
    Ok((li, id))
}

fn assert_locked(h: &mut dyn ClsHost, input: Bytes) -> Result<Bytes, i32> {
    let mut d = Decoder::new(input);
    let (name, ty, cookie, tag) = d
        .decode_struct("cls_lock_assert_op", 1, |_, d| {
            Ok((d.bufferlist()?, d.u8()?, d.bufferlist()?, d.bufferlist()?))
        })
        .map_err(einval)?;
    check_held(h, &name, ty, cookie, &tag)?;
    Ok(Bytes::new())
}

fn set_cookie(h: &mut dyn ClsHost, input: Bytes) -> Result<Bytes, i32> {
    let mut d = Decoder::new(input);
    let (name, ty, cookie, tag, new_cookie) = d
        .decode_struct("cls_lock_set_cookie_op", 1, |_, d| {
            Ok((
                d.bufferlist()?,
                d.u8()?,
                d.bufferlist()?,
                d.bufferlist()?,
                d.bufferlist()?,
            ))
        })
        .map_err(einval)?;
    let (mut li, id) = check_held(h, &name, ty, cookie, &tag)?;
    let new_id = LockerId {
        locker: id.locker,
        cookie: new_cookie,
    };
    if li.lockers.contains_key(&new_id) {
        return Err(-libc::EBUSY);
    }
    let info = li.lockers.remove(&id).unwrap_or_default();
    li.lockers.insert(new_id, info);
    write_lock(h, &name, &li)?;
    Ok(Bytes::new())
}

// ------------------------------------------------------------------ version

const VERSION_ATTR: &[u8] = b"ceph.objclass.version";

/// `obj_version`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ObjVersion {
    pub ver: u64,
    pub tag: Bytes,
}
impl Encode for ObjVersion {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            e.u64(self.ver);
            e.bytes(&self.tag);
        })
    }
}
impl Decode for ObjVersion {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("obj_version", 1, |_, d| {
            Ok(ObjVersion {
                ver: d.u64()?,
                tag: d.bufferlist()?,
            })
        })
    }
}

/// `obj_version_cond`.
struct VersionCond {
    ver: ObjVersion,
    cond: u32,
}
impl Decode for VersionCond {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("obj_version_cond", 1, |_, d| {
            Ok(VersionCond {
                ver: d.decode()?,
                cond: d.u32()?,
            })
        })
    }
}

fn set_version(h: &mut dyn ClsHost, v: &ObjVersion) -> Result<(), i32> {
    h.setxattr(VERSION_ATTR, v.to_bytes(0))
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `init_version`: version 1 with a random 24-character base64 tag (`cls_gen_rand_base64`).
fn init_version(h: &mut dyn ClsHost) -> Result<ObjVersion, i32> {
    let mut raw = [0u8; 18];
    h.random_bytes(&mut raw);
    let mut tag = Vec::with_capacity(24);
    for c in raw.chunks(3) {
        let n = (u32::from(c[0]) << 16) | (u32::from(c[1]) << 8) | u32::from(c[2]);
        for s in [18, 12, 6, 0] {
            tag.push(BASE64[((n >> s) & 63) as usize]);
        }
    }
    let v = ObjVersion {
        ver: 1,
        tag: Bytes::from(tag),
    };
    set_version(h, &v)?;
    Ok(v)
}

fn read_version(h: &mut dyn ClsHost, implicit_create: bool) -> Result<ObjVersion, i32> {
    match h.getxattr(VERSION_ATTR) {
        Ok(bl) => ObjVersion::decode_all(bl).map_err(|_| -libc::EIO),
        Err(e) if e == -libc::ENOENT || e == -libc::ENODATA => {
            if implicit_create {
                init_version(h)
            } else {
                Ok(ObjVersion::default())
            }
        }
        Err(e) => Err(e),
    }
}

fn check_conds(conds: &[VersionCond], v: &ObjVersion) -> bool {
    conds.iter().all(|c| match c.cond {
        1 => v.ver == c.ver.ver && v.tag == c.ver.tag,
        2 => v.ver > c.ver.ver,
        3 => v.ver >= c.ver.ver,
        4 => v.ver < c.ver.ver,
        5 => v.ver <= c.ver.ver,
        6 => v.tag == c.ver.tag,
        7 => v.tag != c.ver.tag,
        _ => true,
    })
}

fn decode_objv_conds(input: Bytes, what: &'static str) -> Result<(ObjVersion, Vec<VersionCond>), i32> {
    let mut d = Decoder::new(input);
    d.decode_struct(what, 1, |_, d| {
        Ok((d.decode::<ObjVersion>()?, d.decode::<Vec<VersionCond>>()?))
    })
    .map_err(einval)
}

fn version_set(h: &mut dyn ClsHost, input: Bytes) -> Result<Bytes, i32> {
    let mut d = Decoder::new(input);
    let v = d
        .decode_struct("cls_version_set_op", 1, |_, d| d.decode::<ObjVersion>())
        .map_err(einval)?;
    set_version(h, &v)?;
    Ok(Bytes::new())
}

fn version_inc(h: &mut dyn ClsHost, input: Bytes) -> Result<Bytes, i32> {
    let (_, conds) = decode_objv_conds(input, "cls_version_inc_op")?;
    let mut v = read_version(h, true)?;
    if !check_conds(&conds, &v) {
        return Err(-libc::ECANCELED);
    }
    v.ver += 1;
    set_version(h, &v)?;
    Ok(Bytes::new())
}

fn version_check(h: &mut dyn ClsHost, input: Bytes) -> Result<Bytes, i32> {
    let (_, conds) = decode_objv_conds(input, "cls_version_check_op")?;
    let v = read_version(h, false)?;
    if !check_conds(&conds, &v) {
        return Err(-libc::ECANCELED);
    }
    Ok(Bytes::new())
}

fn version_read(h: &mut dyn ClsHost) -> Result<Bytes, i32> {
    let v = read_version(h, false)?;
    let mut e = Encoder::new(0);
    e.versioned(1, 1, |e| e.encode(&v));
    Ok(e.into_bytes())
}

#[allow(dead_code)]
const _: () = assert!(LOCK_NONE == 0);
