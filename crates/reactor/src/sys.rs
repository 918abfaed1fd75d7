// SPDX-License-Identifier: LGPL-3.0-or-later
//! The few plain syscalls the reactor makes outside the ring: sockets, socket options, eventfd, affinity.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A socket address in the C layout, kept at a stable heap address while the kernel may read it.
pub struct RawAddr {
    pub storage: libc::sockaddr_storage,
    pub len: libc::socklen_t,
}

impl RawAddr {
    pub fn new(a: &SocketAddr) -> Box<Self> {
        // SAFETY: sockaddr_storage is plain data; all-zero is a valid value.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let len = match a {
            SocketAddr::V4(v4) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: v4.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(v4.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
                unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in, sin) };
                std::mem::size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(v6) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: v6.port().to_be(),
                    sin6_flowinfo: v6.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: v6.ip().octets(),
                    },
                    sin6_scope_id: v6.scope_id(),
                };
                // SAFETY: as above, for sockaddr_in6.
                unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in6, sin6) };
                std::mem::size_of::<libc::sockaddr_in6>()
            }
        };
        Box::new(RawAddr {
            storage,
            len: len as libc::socklen_t,
        })
    }

    pub fn as_ptr(&self) -> *const libc::sockaddr {
        &self.storage as *const _ as *const libc::sockaddr
    }
}

fn from_storage(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match s.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin = unsafe { &*(s as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(s as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

fn name_of(fd: RawFd, peer: bool) -> Option<SocketAddr> {
    // SAFETY: plain data.
    let mut s: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let p = &mut s as *mut _ as *mut libc::sockaddr;
    // SAFETY: p/len describe a valid writable buffer.
    let r = unsafe {
        if peer {
            libc::getpeername(fd, p, &mut len)
        } else {
            libc::getsockname(fd, p, &mut len)
        }
    };
    if r < 0 { None } else { from_storage(&s) }
}

pub fn peer_addr(fd: RawFd) -> Option<SocketAddr> {
    name_of(fd, true)
}

pub fn local_addr(fd: RawFd) -> Option<SocketAddr> {
    name_of(fd, false)
}

fn setsockopt_int(fd: RawFd, level: libc::c_int, opt: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int and its size.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            &v as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

pub fn set_nodelay(fd: RawFd) -> io::Result<()> {
    setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)
}

/// Ask the kernel to report, with each `recvmsg`, how many bytes are still queued on the socket (`TCP_INQ`,
/// Linux 4.18): [`recv_inline`] stops when the socket is drained instead of probing it with one more receive.
pub fn set_recv_inq(fd: RawFd) -> io::Result<()> {
    setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_INQ, 1)
}

/// One non-blocking `recvmsg` into `iov` (filled in order). Returns the bytes received (0: end of stream) and, on
/// a socket with [`set_recv_inq`], the bytes still queued after it.
///
/// # Safety
/// Every iovec must describe writable memory that nothing else reads or writes during the call.
pub unsafe fn recv_inline(fd: RawFd, iov: &mut [libc::iovec]) -> io::Result<(usize, Option<usize>)> {
    // Room for one cmsg carrying an int (TCP_CM_INQ), 8-byte aligned.
    let mut control = [0u64; 4];
    // SAFETY: msghdr is plain data; zero is "no name, no control".
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = iov.len() as _;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: the iovecs are the caller's promise; msg and control live across the call.
    let r = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut inq = None;
    // SAFETY: the CMSG_* walk stays inside msg_control/msg_controllen, which the kernel set.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_TCP
                && (*c).cmsg_type == libc::TCP_CM_INQ
                && (*c).cmsg_len as usize
                    >= libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize
            {
                let v = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::c_int);
                inq = Some(v.max(0) as usize);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((r as usize, inq))
}

/// A new TCP socket of `addr`'s family (blocking mode: io_uring does the waiting).
pub fn tcp_socket(addr: &SocketAddr) -> io::Result<RawFd> {
    let fam = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain syscall.
    cvt(unsafe { libc::socket(fam, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })
}

/// Bind and listen with SO_REUSEPORT, so every core can listen on the same port and the kernel spreads
/// incoming connections over them.
pub fn tcp_listen(addr: &SocketAddr, backlog: i32) -> io::Result<RawFd> {
    let fd = tcp_socket(addr)?;
    let r = (|| {
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
        let a = RawAddr::new(addr);
        // SAFETY: a valid sockaddr of the stated length.
        cvt(unsafe { libc::bind(fd, a.as_ptr(), a.len) })?;
        // SAFETY: plain syscall.
        cvt(unsafe { libc::listen(fd, backlog) })?;
        Ok(())
    })();
    match r {
        Ok(()) => Ok(fd),
        Err(e) => {
            close(fd);
            Err(e)
        }
    }
}

/// A connected `AF_UNIX` stream socket pair, the first one's send buffer set to `sndbuf` bytes (the kernel
/// rounds it up).
pub fn stream_pair(sndbuf: i32) -> io::Result<(RawFd, RawFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two fds into the array we own.
    cvt(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    // SAFETY: a plain int option.
    let r = unsafe {
        libc::setsockopt(
            fds[0],
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            &sndbuf as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        close(fds[0]);
        close(fds[1]);
        return Err(e);
    }
    Ok((fds[0], fds[1]))
}

/// Bytes waiting to be read on a socket (`FIONREAD`).
pub fn queued_in(fd: RawFd) -> io::Result<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int we own.
    cvt(unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) })?;
    Ok(n as usize)
}

pub fn shutdown(fd: RawFd) {
    // SAFETY: plain syscall; errors (ENOTCONN) are irrelevant here.
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
}

pub fn close(fd: RawFd) {
    // SAFETY: the caller owns fd and no submitted operation refers to it any more.
    unsafe { libc::close(fd) };
}

pub fn eventfd() -> io::Result<RawFd> {
    // SAFETY: plain syscall.
    // Blocking mode: io_uring would complete a read of an O_NONBLOCK eventfd with EAGAIN on some kernels instead
    // of waiting; a write only blocks at a counter of 2^64-2, which one-per-turn doorbells never reach.
    cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) })
}

pub fn eventfd_signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64. EAGAIN (counter saturated) means a wake-up is pending anyway.
    unsafe { libc::write(fd, &one as *const u64 as *const libc::c_void, 8) };
}

/// A close-on-exec duplicate of `fd`.
pub fn dup(fd: RawFd) -> io::Result<RawFd> {
    // SAFETY: plain syscall; the caller owns the result.
    cvt(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) })
}

/// CPUs this process may run on (sched_getaffinity), in ascending order.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; the call writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Vec::new();
    }
    // SAFETY: CPU_ISSET reads the set we own.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Pin the calling thread to one CPU.
pub fn pin_to(cpu: usize) -> io::Result<()> {
    // CPU_SET indexes a fixed-size bit array: a CPU beyond it would index out of bounds.
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: as in allowed_cpus.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes into our set; cpu is below CPU_SETSIZE (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: plain syscall on the calling thread (pid 0).
    cvt(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) }).map(|_| ())
}
