package driver

import "strconv"

// Result is a CUresult, the status code every driver call returns.
type Result int32

// CUresult values this package names. Others still round-trip through Result
// and print as "CUresult(N)".
const (
	Success                         Result = 0
	ErrorInvalidValue               Result = 1
	ErrorOutOfMemory                Result = 2
	ErrorNotInitialized             Result = 3
	ErrorDeinitialized              Result = 4
	ErrorProfilerDisabled           Result = 5
	ErrorStubLibrary                Result = 34
	ErrorDeviceUnavailable          Result = 46
	ErrorNoDevice                   Result = 100
	ErrorInvalidDevice              Result = 101
	ErrorDeviceNotLicensed          Result = 102
	ErrorInvalidImage               Result = 200
	ErrorInvalidContext             Result = 201
	ErrorContextAlreadyCurrent      Result = 202
	ErrorMapFailed                  Result = 205
	ErrorUnmapFailed                Result = 206
	ErrorArrayIsMapped              Result = 207
	ErrorAlreadyMapped              Result = 208
	ErrorNoBinaryForGPU             Result = 209
	ErrorAlreadyAcquired            Result = 210
	ErrorNotMapped                  Result = 211
	ErrorECCUncorrectable           Result = 214
	ErrorUnsupportedLimit           Result = 215
	ErrorContextAlreadyInUse        Result = 216
	ErrorPeerAccessUnsupported      Result = 217
	ErrorInvalidPTX                 Result = 218
	ErrorInvalidGraphicsContext     Result = 219
	ErrorNvlinkUncorrectable        Result = 220
	ErrorJITCompilerNotFound        Result = 221
	ErrorUnsupportedPTXVersion      Result = 222
	ErrorJITCompilationDisabled     Result = 223
	ErrorInvalidSource              Result = 300
	ErrorFileNotFound               Result = 301
	ErrorOperatingSystem            Result = 304
	ErrorInvalidHandle              Result = 400
	ErrorIllegalState               Result = 401
	ErrorNotFound                   Result = 500
	ErrorNotReady                   Result = 600
	ErrorIllegalAddress             Result = 700
	ErrorLaunchOutOfResources       Result = 701
	ErrorLaunchTimeout              Result = 702
	ErrorPeerAccessAlreadyEnabled   Result = 704
	ErrorPeerAccessNotEnabled       Result = 705
	ErrorPrimaryContextActive       Result = 708
	ErrorContextIsDestroyed         Result = 709
	ErrorAssert                     Result = 710
	ErrorTooManyPeers               Result = 711
	ErrorHardwareStackError         Result = 714
	ErrorIllegalInstruction         Result = 715
	ErrorMisalignedAddress          Result = 716
	ErrorInvalidAddressSpace        Result = 717
	ErrorInvalidPC                  Result = 718
	ErrorLaunchFailed               Result = 719
	ErrorCooperativeLaunchTooLarge  Result = 720
	ErrorNotPermitted               Result = 800
	ErrorNotSupported               Result = 801
	ErrorSystemNotReady             Result = 802
	ErrorSystemDriverMismatch       Result = 803
	ErrorCompatNotSupportedOnDevice Result = 804
	ErrorUnknown                    Result = 999
)

// resultNames is the static CUresult -> CUDA_ERROR_* table, usable without
// the driver loaded.
var resultNames = map[Result]string{
	Success:                         "CUDA_SUCCESS",
	ErrorInvalidValue:               "CUDA_ERROR_INVALID_VALUE",
	ErrorOutOfMemory:                "CUDA_ERROR_OUT_OF_MEMORY",
	ErrorNotInitialized:             "CUDA_ERROR_NOT_INITIALIZED",
	ErrorDeinitialized:              "CUDA_ERROR_DEINITIALIZED",
	ErrorProfilerDisabled:           "CUDA_ERROR_PROFILER_DISABLED",
	ErrorStubLibrary:                "CUDA_ERROR_STUB_LIBRARY",
	ErrorDeviceUnavailable:          "CUDA_ERROR_DEVICE_UNAVAILABLE",
	ErrorNoDevice:                   "CUDA_ERROR_NO_DEVICE",
	ErrorInvalidDevice:              "CUDA_ERROR_INVALID_DEVICE",
	ErrorDeviceNotLicensed:          "CUDA_ERROR_DEVICE_NOT_LICENSED",
	ErrorInvalidImage:               "CUDA_ERROR_INVALID_IMAGE",
	ErrorInvalidContext:             "CUDA_ERROR_INVALID_CONTEXT",
	ErrorContextAlreadyCurrent:      "CUDA_ERROR_CONTEXT_ALREADY_CURRENT",
	ErrorMapFailed:                  "CUDA_ERROR_MAP_FAILED",
	ErrorUnmapFailed:                "CUDA_ERROR_UNMAP_FAILED",
	ErrorArrayIsMapped:              "CUDA_ERROR_ARRAY_IS_MAPPED",
	ErrorAlreadyMapped:              "CUDA_ERROR_ALREADY_MAPPED",
	ErrorNoBinaryForGPU:             "CUDA_ERROR_NO_BINARY_FOR_GPU",
	ErrorAlreadyAcquired:            "CUDA_ERROR_ALREADY_ACQUIRED",
	ErrorNotMapped:                  "CUDA_ERROR_NOT_MAPPED",
	ErrorECCUncorrectable:           "CUDA_ERROR_ECC_UNCORRECTABLE",
	ErrorUnsupportedLimit:           "CUDA_ERROR_UNSUPPORTED_LIMIT",
	ErrorContextAlreadyInUse:        "CUDA_ERROR_CONTEXT_ALREADY_IN_USE",
	ErrorPeerAccessUnsupported:      "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
	ErrorInvalidPTX:                 "CUDA_ERROR_INVALID_PTX",
	ErrorInvalidGraphicsContext:     "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT",
	ErrorNvlinkUncorrectable:        "CUDA_ERROR_NVLINK_UNCORRECTABLE",
	ErrorJITCompilerNotFound:        "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
	ErrorUnsupportedPTXVersion:      "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	ErrorJITCompilationDisabled:     "CUDA_ERROR_JIT_COMPILATION_DISABLED",
	ErrorInvalidSource:              "CUDA_ERROR_INVALID_SOURCE",
	ErrorFileNotFound:               "CUDA_ERROR_FILE_NOT_FOUND",
	ErrorOperatingSystem:            "CUDA_ERROR_OPERATING_SYSTEM",
	ErrorInvalidHandle:              "CUDA_ERROR_INVALID_HANDLE",
	ErrorIllegalState:               "CUDA_ERROR_ILLEGAL_STATE",
	ErrorNotFound:                   "CUDA_ERROR_NOT_FOUND",
	ErrorNotReady:                   "CUDA_ERROR_NOT_READY",
	ErrorIllegalAddress:             "CUDA_ERROR_ILLEGAL_ADDRESS",
	ErrorLaunchOutOfResources:       "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	ErrorLaunchTimeout:              "CUDA_ERROR_LAUNCH_TIMEOUT",
	ErrorPeerAccessAlreadyEnabled:   "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
	ErrorPeerAccessNotEnabled:       "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
	ErrorPrimaryContextActive:       "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE",
	ErrorContextIsDestroyed:         "CUDA_ERROR_CONTEXT_IS_DESTROYED",
	ErrorAssert:                     "CUDA_ERROR_ASSERT",
	ErrorTooManyPeers:               "CUDA_ERROR_TOO_MANY_PEERS",
	ErrorHardwareStackError:         "CUDA_ERROR_HARDWARE_STACK_ERROR",
	ErrorIllegalInstruction:         "CUDA_ERROR_ILLEGAL_INSTRUCTION",
	ErrorMisalignedAddress:          "CUDA_ERROR_MISALIGNED_ADDRESS",
	ErrorInvalidAddressSpace:        "CUDA_ERROR_INVALID_ADDRESS_SPACE",
	ErrorInvalidPC:                  "CUDA_ERROR_INVALID_PC",
	ErrorLaunchFailed:               "CUDA_ERROR_LAUNCH_FAILED",
	ErrorCooperativeLaunchTooLarge:  "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
	ErrorNotPermitted:               "CUDA_ERROR_NOT_PERMITTED",
	ErrorNotSupported:               "CUDA_ERROR_NOT_SUPPORTED",
	ErrorSystemNotReady:             "CUDA_ERROR_SYSTEM_NOT_READY",
	ErrorSystemDriverMismatch:       "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	ErrorCompatNotSupportedOnDevice: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
	ErrorUnknown:                    "CUDA_ERROR_UNKNOWN",
}

// String returns the CUDA_ERROR_* name of a known code (CUDA_SUCCESS for 0)
// and "CUresult(N)" otherwise. It needs no driver.
func (r Result) String() string {
	if s, ok := resultNames[r]; ok {
		return s
	}
	return "CUresult(" + strconv.Itoa(int(r)) + ")"
}

// resultOf extracts the CUresult from the first return value of a
// purego.SyscallN call (its low 32 bits).
func resultOf(r1 uintptr) Result { return Result(int32(uint32(r1))) }
