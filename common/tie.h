/*
 * tie.h - compile-time ties between the enums that cross a boundary.
 *
 * An enum of one layer often travels as another's number: the pipeline's
 * dtypes in the ring, the client's orders in the protocol. TIE(a, b)
 * fails the build when a and b differ, so reordering one side can never
 * silently change the wire or ring format.
 */
#ifndef LD_TIE_H
#define LD_TIE_H

#define TIE(a, b)                                                              \
	_Static_assert((long long)(a) == (long long)(b), #a " must equal " #b)

#endif /* LD_TIE_H */
