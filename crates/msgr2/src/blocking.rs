// SPDX-License-Identifier: LGPL-3.0-or-later
//! Thin blocking std::net adapter (filled in below).
