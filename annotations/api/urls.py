from django.urls import include, path
from rest_framework.routers import DefaultRouter

from annotations.api import agreement, assignments, crowd, quality, studies
from annotations.api.sign_in import TokenView

router = DefaultRouter()
router.register("studies", studies.StudyViewSet, basename="study")
router.register("items", studies.ItemViewSet, basename="item")
router.register("annotations", studies.AnnotationViewSet, basename="annotation")
router.register("annotators", studies.AnnotatorViewSet, basename="annotator")
router.register("exports", studies.ExportJobViewSet, basename="export")
router.register("imports", studies.ImportJobViewSet, basename="import")
router.register("assignments", assignments.MyAssignmentViewSet, basename="assignment")

urlpatterns = [
    path("studies/<int:pk>/agreement/", agreement.AgreementReportView.as_view(), name="api-agreement"),
    path("studies/<int:pk>/consensus/", agreement.ConsensusView.as_view(), name="api-consensus"),
    path("studies/<int:pk>/adjudication/", agreement.AdjudicationView.as_view(), name="api-adjudication"),
    path("studies/<int:pk>/share/", studies.StudyShareView.as_view(), name="api-study-share"),
    path(
        "studies/<int:pk>/enrollments/", studies.StudyEnrollmentView.as_view(), name="api-study-enrollments"
    ),
    path(
        "studies/<int:pk>/enrollments/unenroll/",
        studies.StudyUnenrollView.as_view(),
        name="api-study-unenroll",
    ),
    path(
        "studies/<int:pk>/enrollments/pool/",
        studies.StudyPoolEnrollView.as_view(),
        name="api-study-enroll-pool",
    ),
    path(
        "studies/<int:pk>/enrollments/bulk/",
        studies.StudyBulkEnrollView.as_view(),
        name="api-study-enroll-bulk",
    ),
    path("studies/<int:pk>/items/import/", studies.ItemImportView.as_view(), name="api-item-import"),
    path(
        "studies/<int:pk>/annotations/import/",
        studies.AnnotationImportView.as_view(),
        name="api-annotation-import",
    ),
    path(
        "studies/<int:pk>/features/import/", studies.FeatureImportView.as_view(), name="api-features-import"
    ),
    path("studies/<int:pk>/features/", studies.FeatureExportView.as_view(), name="api-features-export"),
    path(
        "studies/<int:pk>/labelstudio/import/",
        studies.LabelStudioImportView.as_view(),
        name="api-labelstudio-import",
    ),
    path("studies/labelstudio/", studies.LabelStudioCreateView.as_view(), name="api-labelstudio-create"),
    path("studies/<int:pk>/export/<str:fmt>/", studies.StudyExportView.as_view(), name="api-study-export"),
    path("exports/<int:pk>/download/", studies.ExportDownloadView.as_view(), name="api-export-download"),
    path("imports/<int:pk>/cancel/", studies.ImportJobCancelView.as_view(), name="api-import-cancel"),
    path("presets/", studies.PresetListView.as_view(), name="api-presets"),
    path("presets/<str:key>/", studies.PresetDetailView.as_view(), name="api-preset"),
    path("protocols/validate/", studies.ProtocolValidateView.as_view(), name="api-protocol-validate"),
    path("me/", studies.MeView.as_view(), name="api-me"),
    path("auth/token/", TokenView.as_view(), name="api-token"),
    path("studies/<int:pk>/assignments/next/", assignments.ClaimNextView.as_view(), name="api-claim-next"),
    path("assignments/<int:pk>/submit/", assignments.SubmitView.as_view(), name="api-assignment-submit"),
    path("assignments/<int:pk>/skip/", assignments.SkipView.as_view(), name="api-assignment-skip"),
    path("assignments/<int:pk>/release/", assignments.ReleaseView.as_view(), name="api-assignment-release"),
    path("studies/<int:pk>/invitations/", crowd.StudyInvitationsView.as_view(), name="api-study-invitations"),
    path(
        "studies/<int:pk>/invitations/<int:invitation_id>/revoke/",
        crowd.InvitationRevokeView.as_view(),
        name="api-invitation-revoke",
    ),
    path("studies/<int:pk>/payments/", crowd.StudyPaymentsView.as_view(), name="api-study-payments"),
    path("studies/<int:pk>/quality/", quality.QualityReportView.as_view(), name="api-quality"),
    path(
        "studies/<int:pk>/quality/settings/",
        quality.QualitySettingsView.as_view(),
        name="api-quality-settings",
    ),
    path("studies/<int:pk>/controls/import/", quality.ControlImportView.as_view(), name="api-control-import"),
    path("studies/<int:pk>/exclusions/", quality.ExclusionListView.as_view(), name="api-exclusions"),
    path(
        "studies/<int:pk>/exclusions/<int:annotator_id>/reinstate/",
        quality.ExclusionReinstateView.as_view(),
        name="api-exclusion-reinstate",
    ),
    path("items/<int:pk>/control/", quality.ItemControlView.as_view(), name="api-item-control"),
    path("", include(router.urls)),
]
