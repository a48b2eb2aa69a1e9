// Package charges keeps the charges admission made to quotas whose
// objects the controller has not seen yet: the charge book, one for both
// kinds of quota. See [Book].
package charges
